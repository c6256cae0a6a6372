package identity

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/certs"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Config is what an Authority is built with.
type Config struct {
	// Store holds the identities, tokens, logins, devices and
	// certificates.
	Store *store.Store
	// Certs is the server's TLS material; nil: plain HTTP, with no
	// device certificates.
	Certs *certs.Set
	// DeviceCertValidity is how long a device certificate the Authority
	// signs is valid. Default DefaultDeviceCertValidity.
	DeviceCertValidity time.Duration
	// Logger receives the logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnRotationSettled, if set, hears that a rotation of device id's token
	// was confirmed or failed here, for the other nodes of a cluster.
	OnRotationSettled func(id string)
}

// DefaultDeviceCertValidity is how long a device certificate is valid by
// default: a year.
const DefaultDeviceCertValidity = 365 * 24 * time.Hour

// Defaults of the cache of callers.
const (
	callerCacheTTL = 5 * time.Second
	callerCacheMax = 4096
)

// Authority finds whom a request or a link acts for, operator or device,
// and carries what ends that: revocations and token rotations. It signs
// devices' certificates with the server's device CA.
type Authority struct {
	store             *store.Store
	certs             *certs.Set // nil: plain HTTP
	certValidity      time.Duration
	log               *slog.Logger
	now               func() time.Time
	onRotationSettled func(id string)

	// callers are the operator tokens' callers, kept until revoked.
	callers *callerCache
	// revocations close the open surfaces of revoked identities.
	revocations *revocations
	// rotations are the rotation requests waiting for their device.
	rotations *rotationWaiters
}

// New is an Authority built with cfg.
func New(cfg Config) *Authority {
	validity := cfg.DeviceCertValidity
	if validity <= 0 {
		validity = DefaultDeviceCertValidity
	}
	settled := cfg.OnRotationSettled
	if settled == nil {
		settled = func(string) {}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Authority{
		store: cfg.Store, certs: cfg.Certs, certValidity: validity,
		log: cmp.Or(cfg.Logger, slog.Default()), now: now, onRotationSettled: settled,
		callers: newCallerCache(callerCacheTTL, callerCacheMax), revocations: newRevocations(), rotations: newRotationWaiters(),
	}
}
