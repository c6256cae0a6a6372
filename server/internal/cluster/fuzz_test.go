package cluster

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/nats-io/nats.go"
)

// fuzzDecode fuzzes decode for messages of type T, from the seeds and
// their truncations: it must never panic, and what it accepts must pass
// its check and decode again as sent by a node (message).
func fuzzDecode[T any, P checked[T]](f *testing.F, seeds ...T) {
	v := strconv.Itoa(ProtocolVersion)
	for _, s := range seeds {
		data, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v, data)
		f.Add(v, data[:len(data)/2])
		f.Add(strconv.Itoa(ProtocolVersion+1), data)
	}
	f.Add(v, []byte(`null`))
	f.Add(v, []byte(`{"device_id":1e999}`))
	f.Add("", []byte(`{}`))
	f.Fuzz(func(t *testing.T, version string, data []byte) {
		m := nats.NewMsg("aip.fuzz")
		m.Header.Set(versionHeader, version)
		m.Data = data
		var got T
		if err := decode[T, P](m, &got); err != nil {
			return
		}
		again, err := message("aip.fuzz", got)
		if err != nil {
			t.Fatalf("accepted %q, but it cannot be sent on: %v", data, err)
		}
		var back T
		if err := decode[T, P](again, &back); err != nil {
			t.Fatalf("accepted %q, but not as a node sends it: %v", data, err)
		}
	})
}

func FuzzDecodeCommand(f *testing.F) {
	fuzzDecode(f, wellFormed("kiosk.1", "a"),
		Command{DeviceID: "k", LeaseEpoch: 3, From: "b", FromEpoch: 2, Timeout: time.Minute,
			Message: &protocol.ServerMessage{Type: protocol.ServerCancelCommand, ResponseID: "r",
				Actions: []protocol.Command{{ToolName: "hash_file", CallID: "c", Parameters: map[string]any{"path": "/x"}}}}})
}

func FuzzDecodeReply(f *testing.F) {
	fuzzDecode(f, Reply{Outcome: Sent}, Reply{Outcome: Stale, Lease: 4}, Reply{Outcome: Between, GraceLeft: time.Second},
		Reply{Outcome: Failed, Error: "frame too big"})
}

func FuzzDecodeLeaseChange(f *testing.F) {
	fuzzDecode(f, LeaseChange{DeviceID: "k", NodeID: "a", NodeEpoch: 1, Epoch: 2}, LeaseChange{DeviceID: "k", Epoch: 2})
}

func FuzzDecodeRecorded(f *testing.F) {
	fuzzDecode(f, Recorded{ResponseID: "r", DeviceID: "k", Results: []protocol.Result{{Status: protocol.ResultSuccess, CallID: "c", Result: "ok"}}, SessionEnded: true},
		Recorded{ResponseID: "r", DeviceID: "k", Refused: "no"}, Recorded{ResponseID: "r", DeviceID: "k", ShutDown: true})
}

func FuzzDecodeRevocation(f *testing.F) {
	fuzzDecode(f, Revocation{From: "a", Identity: "ci", TokenIDs: []string{"t1"}})
}

func FuzzDecodeTaskCancel(f *testing.F) {
	fuzzDecode(f, TaskCancel{From: "a", ID: "t1", Why: "tasks/cancel by ci"})
}

func FuzzDecodeDeviceEvent(f *testing.F) {
	fuzzDecode(f, DeviceEvent{From: "a", DeviceID: "k", What: DeviceRotate})
}

func FuzzDecodeHandoff(f *testing.F) {
	fuzzDecode(f, Handoff{From: "a", FromEpoch: 3})
}
