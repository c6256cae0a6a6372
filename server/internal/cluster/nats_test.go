package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNATSURLsAreLoggedWithoutPasswordsOrTokens(t *testing.T) {
	assert.Equal(t, "nats://127.0.0.1:4222", RedactNATS("nats://127.0.0.1:4222"))
	assert.Equal(t, "nats://aip:xxxxx@a:4222,tls://aip:xxxxx@b:4222",
		RedactNATS("nats://aip:pw1@a:4222, tls://aip:pw2@b:4222"))
	assert.Equal(t, "nats://xxxxx@a:4222", RedactNATS("nats://s3cr3t-token@a:4222"))
	assert.Equal(t, "nats://a:4222?token=REDACTED", RedactNATS("nats://a:4222?token=s3cr3t"))
	assert.Equal(t, "nats://xxxxx@a:port", RedactNATS("nats://aip:pw@a:port"))
}
