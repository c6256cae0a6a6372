package httpapi

import (
	"crypto/x509"
	"fmt"
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/certs"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// signCertificate is POST /api/devices/{id}/certificate: a certificate for
// an enrolled device's key, signed with the device CA.
func (h *deviceHandlers) signCertificate(w http.ResponseWriter, r *http.Request) {
	d, ok := h.lookupDevice(w, r)
	if !ok {
		return
	}
	var req api.CertificateRequest
	if !readJSON(w, r, &req) {
		return
	}
	cert, pem, err := h.auth.SignDeviceCertificate(d.ID, req.CSR)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rec := identity.SignedRecord(d.ID, cert)
	audit := identity.CallerFrom(r).Audit(api.ActionDeviceCertificate, d.ID, map[string]any{"serial": rec.Serial})
	err = h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Devices().AddCertificate(rec); err != nil {
			return err
		}
		return tx.Audit().Append(audit)
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	h.log.Info("device certificate signed", "device", d.ID, "certificate", certs.Describe(cert))
	writeJSON(w, http.StatusCreated, certificateView(d.ID, cert, pem))
}

// certificateView is a certificate signed for device id as the API shows it.
func certificateView(id string, c *x509.Certificate, pem []byte) api.Certificate {
	return api.Certificate{ID: id, Certificate: string(pem), Serial: fmt.Sprintf("%x", c.SerialNumber), NotAfter: c.NotAfter.UTC()}
}
