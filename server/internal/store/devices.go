package store

import (
	"context"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/devices"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// The enrolled devices and their credentials: see package devices.
type (
	// Device is an enrolled device. Only a hash of its token is kept.
	Device = devices.Device
	// TokenRotation is a rotation of a device's token that the operator
	// asked for and the device has not confirmed.
	TokenRotation = devices.TokenRotation
	// TokenKind says which of a device's tokens a token is.
	TokenKind = devices.TokenKind
	// TokenMatch is the device a token belongs to, and which of its
	// tokens it is.
	TokenMatch = devices.TokenMatch
	// DeviceCert is a device certificate the store knows: one the server
	// signed, or one a device presented.
	DeviceCert = devices.DeviceCert
	// DeviceWrites are a write's changes to enrolled devices and their
	// credentials. Reached by [Tx.Devices]; they belong to the write's
	// transaction.
	DeviceWrites = devices.Writes
	// DeviceReads are the reads of enrolled devices and their
	// credentials. Reached by [Store.Devices].
	DeviceReads = devices.Reads
)

// The kinds of token: see [devices.TokenCurrent] and the others.
const (
	TokenCurrent = devices.TokenCurrent
	TokenSent    = devices.TokenSent
	TokenRetired = devices.TokenRetired
)

// Devices are this write's changes to what [DeviceWrites] keep.
func (t *Tx) Devices() DeviceWrites { return devices.WritesIn(partTx{t}) }

// Devices are the reads of what [DeviceReads] keep.
func (s *Store) Devices() DeviceReads { return devices.ReadsOf(partReader{s}) }

// ReadRowsUnprepared runs a query on the readers without preparing it.
func (c partReader) ReadRowsUnprepared(ctx context.Context, query string, args ...any) (sqlrow.Rows, error) {
	rows, err := c.s.rdb.QueryContext(ctx, c.s.dialect.bind(query), c.s.dialect.args(args)...)
	if err != nil {
		return nil, err // not a nil *sql.Rows in a Rows that is not nil
	}
	return rows, nil
}
