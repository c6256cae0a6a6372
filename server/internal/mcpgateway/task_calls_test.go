package mcpgateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A task's ttl is what its client asked, an hour if nothing, within the
// operator's bound and the call's own timeout.
func TestATasksTTLIsHeldWithinItsBounds(t *testing.T) {
	o := Options{TaskMaxTTL: 2 * time.Hour}
	o.setDefaults()
	g := &Gateway{cfg: Config{Options: o}}
	ms := func(d time.Duration) *int64 { n := d.Milliseconds(); return &n }
	for _, tc := range []struct {
		asked   *int64
		timeout string
		want    time.Duration
	}{
		{nil, "", time.Hour},
		{ms(10 * time.Minute), "", 10 * time.Minute},
		{ms(5 * time.Hour), "", 2 * time.Hour},
		{ms(5 * time.Hour), "30s", 30 * time.Second},
		{nil, "90m", time.Hour},
		{ms(time.Millisecond), "", time.Second},
		{func() *int64 { n := int64(1) << 62; return &n }(), "", 2 * time.Hour},
	} {
		got, err := g.taskTTL(tc.asked, tc.timeout)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "asked %v, timeout %q", tc.asked, tc.timeout)
	}
	_, err := g.taskTTL(nil, "soon")
	assert.ErrorContains(t, err, `argument "timeout": "soon"`)
}
