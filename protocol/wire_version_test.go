package protocol

import (
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheSubprotocolNamesTheWireVersion(t *testing.T) {
	assert.Equal(t, wirePrefix+strconv.Itoa(WireVersion), Subprotocol)
}

func TestAnUpgradeOfferingOnlyAnotherWireVersionIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		offered []string
		refused []string
		newer   bool
	}{
		"this version":                  {offered: []string{Subprotocol}},
		"this version among others":     {offered: []string{"aip.cbor.v2, " + Subprotocol}},
		"no subprotocol (JSON)":         {},
		"a subprotocol not ours (JSON)": {offered: []string{"chat"}},
		"a newer version":               {offered: []string{"aip.cbor.v2"}, refused: []string{"aip.cbor.v2"}, newer: true},
		"an older version":              {offered: []string{"chat", "aip.cbor.v0"}, refused: []string{"aip.cbor.v0"}},
		"versions in one header":        {offered: []string{"aip.cbor.v3 , aip.cbor.v2"}, refused: []string{"aip.cbor.v3", "aip.cbor.v2"}, newer: true},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/ws", nil)
			for _, o := range tc.offered {
				r.Header.Add("Sec-WebSocket-Protocol", o)
			}
			err := CheckOffer(r)
			if tc.refused == nil {
				assert.NoError(t, err)
				return
			}
			var m *WireMismatch
			require.ErrorAs(t, err, &m)
			assert.Equal(t, tc.refused, m.Offered)
			assert.Equal(t, tc.newer, m.Newer())
		})
	}
}

func TestAWireRefusalNamesBothSidesAndWhatToDo(t *testing.T) {
	newer := (&WireMismatch{Offered: []string{"aip.cbor.v2"}}).Explain("aip-agent/2.0.0", "aip-server 1.4.0")
	assert.Equal(t, "aip-agent/2.0.0 speaks aip.cbor.v2, newer than aip-server 1.4.0, which speaks aip.cbor.v1: "+
		"upgrade the server, or run an agent release that speaks aip.cbor.v1", newer)
	older := (&WireMismatch{Offered: []string{"aip.cbor.v0"}}).Explain("aip-agent/0.1.0", "aip-server 1.4.0")
	assert.Equal(t, "aip-agent/0.1.0 speaks aip.cbor.v0, older than aip-server 1.4.0, which speaks aip.cbor.v1: "+
		"update the agent to a release that speaks aip.cbor.v1", older)
}
