package protocol

import (
	"crypto/x509"
	"fmt"
	"strings"
)

// DeviceCertDomain is the domain under which a device certificate names
// its device: a certificate for device ID carries the DNS name
// ID.devices.edgeaip among its subject alternative names. The server
// takes such a certificate, verified against its client CAs, in place of
// the device's token.
const DeviceCertDomain = "devices.edgeaip"

// DeviceCertName is the DNS name a certificate for device id carries.
func DeviceCertName(id string) string { return id + "." + DeviceCertDomain }

// DeviceOfCert is the device c names by a DNS name under
// DeviceCertDomain, matched exactly, case included, as device ids are: ""
// if it names none. A certificate that names two devices names none that
// can be trusted, and is an error.
func DeviceOfCert(c *x509.Certificate) (string, error) {
	var id string
	for _, name := range c.DNSNames {
		d, ok := strings.CutSuffix(name, "."+DeviceCertDomain)
		switch {
		case !ok || d == "":
		case id != "" && d != id:
			return "", fmt.Errorf("certificate %s names devices %q and %q", serialOf(c), id, d)
		default:
			id = d
		}
	}
	return id, nil
}

// serialOf names a certificate by its serial number, in hex.
func serialOf(c *x509.Certificate) string { return fmt.Sprintf("serial %x", c.SerialNumber) }
