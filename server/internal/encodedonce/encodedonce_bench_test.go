package encodedonce

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
)

// BenchmarkACommandsEncodings is what a command's parameters cost to
// encode from admission to audit: as they were (JSON three times, CBOR
// twice) and wrapped (once each, then copied).
func BenchmarkACommandsEncodings(b *testing.B) {
	for _, size := range []struct {
		name   string
		params func() map[string]any
	}{
		{"path", func() map[string]any { return map[string]any{"path": "/var/lib/kiosk/screen.png"} }},
		{"64KiB", func() map[string]any {
			return map[string]any{"path": "/var/lib/kiosk/page.html", "content": strings.Repeat("<p>kiosk</p>", 64<<10/12)}
		}},
	} {
		b.Run(size.name+"/as-is", func(b *testing.B) {
			for b.Loop() {
				encodeAll(b, size.params(), json.Marshal, func(a []protocol.Command) ([]byte, error) { return json.Marshal(a) })
			}
		})
		b.Run(size.name+"/wrapped", func(b *testing.B) {
			for b.Loop() {
				p := size.params()
				Wrap(p)
				encodeAll(b, p, func(v any) ([]byte, error) { return JSON(v.(map[string]any)) }, CommandsJSON)
			}
		})
	}
}

// encodeAll encodes p as admission (its JSON, and a frame), the wire (a
// frame), the store (the command's actions) and the audit log (its JSON)
// do, with params and actions for the JSON of each.
func encodeAll(b *testing.B, p map[string]any, params func(any) ([]byte, error), actions func([]protocol.Command) ([]byte, error)) {
	f := frame(p)
	for _, enc := range []func() ([]byte, error){
		func() ([]byte, error) { return params(p) },
		func() ([]byte, error) { return protocol.CBOR.Marshal(f) },
		func() ([]byte, error) { return protocol.CBOR.Marshal(f) },
		func() ([]byte, error) { return actions(f.Actions) },
		func() ([]byte, error) { return params(p) },
	} {
		if _, err := enc(); err != nil {
			b.Fatal(err)
		}
	}
}
