package outbox

// Replay replays data as Open does, without opening a file: which
// response_ids it holds an accept record for, and how many of its bytes
// are whole, valid records.
func Replay(data []byte) (accepted map[string]bool, good int64) {
	o := newOutbox(0, nil)
	good = o.replay(data)
	accepted = map[string]bool{}
	for id, e := range o.entries {
		accepted[id] = e.accepted
	}
	return accepted, good
}

// Tombstones are the response_ids whose results are tombstones, with the
// bytes each takes in the file.
func (o *Outbox) Tombstones() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int64{}
	for id, e := range o.entries {
		if e.tomb {
			out[id] = e.size
		}
	}
	return out
}
