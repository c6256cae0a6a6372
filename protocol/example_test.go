package protocol_test

import (
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
)

// A frame as UFO's pydantic models write it, with every optional field
// present as null, decodes to the same message as our terser JSON and CBOR.
func ExampleEncoding_Unmarshal() {
	frame := []byte(`{"type":"heartbeat","status":"ok","client_type":"device","session_id":null,` +
		`"client_id":"kiosk-1","action_results":null,"timestamp":"2026-11-21T08:00:00.123456+00:00","metadata":null}`)
	var m protocol.ClientMessage
	if err := protocol.JSON.Unmarshal(frame, &m); err != nil {
		panic(err)
	}
	ours, _ := protocol.JSON.Marshal(&m)
	cbor, _ := protocol.CBOR.Marshal(&m)
	fmt.Println(string(ours))
	fmt.Println(len(frame), len(ours), len(cbor))

	err := protocol.JSON.Unmarshal([]byte(`{"type":"heartbeat","status":"sleepy"}`), &m)
	fmt.Println(err)
	// Output:
	// {"type":"heartbeat","status":"ok","client_type":"device","client_id":"kiosk-1","timestamp":"2026-11-21T08:00:00.123456+00:00"}
	// 182 126 107
	// malformed frame: field "status": unknown value "sleepy"
}
