package protocol

import (
	"bytes"
	"encoding/json"
)

// commandIDs is what a frame the decoder refused still tells of the
// command it carried: its type, response_id and session_id, and the
// call_id of each of its actions. Any of them may be missing.
type commandIDs struct {
	typ, responseID, sessionID string
	callIDs                    []string // the readable call_ids, in order
	actions                    bool     // the actions were read
}

// readRefusedCommand fills in, on a server message m whose frame data the
// decoder refused, the ids a lenient read finds (readCommandIDs): its
// type, response_id and session_id, and, in place of its actions, one
// holding only the call_id for each call_id found. What the decoder had
// read before it stopped is kept where the lenient read finds nothing.
func (e Encoding) readRefusedCommand(data []byte, m Message) {
	sm, ok := m.(*ServerMessage)
	if !ok {
		return
	}
	ids := e.readCommandIDs(data)
	if ids.typ != "" {
		sm.Type = ServerMessageType(ids.typ)
	}
	if ids.responseID != "" {
		sm.ResponseID = ids.responseID
	}
	if ids.sessionID != "" {
		sm.SessionID = ids.sessionID
	}
	if ids.actions {
		sm.Actions = make([]Command, len(ids.callIDs))
		for i, id := range ids.callIDs {
			sm.Actions[i] = Command{CallID: id}
		}
	}
}

// answeredByName says whether bad, a frame that was refused, is a COMMAND
// whose response_id is known: the reply can name it, so that its sender
// ends it rather than wait for it.
func answeredByName(bad Message) bool {
	sm, ok := bad.(*ServerMessage)
	return ok && sm.Type == ServerCommand && sm.ResponseID != ""
}

// knownCallIDs are the call_ids of m's actions that are not empty.
func knownCallIDs(m *ServerMessage) []string {
	if m == nil {
		return nil
	}
	var out []string
	for _, a := range m.Actions {
		if a.CallID != "" {
			out = append(out, a.CallID)
		}
	}
	return out
}

// readCommandIDs reads the ids of a server frame leniently: it looks only
// at the top-level fields it needs and at the call_id of each action, and
// steps over everything else, however deep, without building it. It is
// for a frame the strict decoder refused, so that the command can be
// answered by name rather than left to time out; it never fails, it
// just reads less.
func (e Encoding) readCommandIDs(data []byte) commandIDs {
	if e == JSON {
		return readJSONCommandIDs(data)
	}
	return readCBORCommandIDs(data)
}

func readCBORCommandIDs(data []byte) commandIDs {
	var ids commandIDs
	r := &cborReader{data: data}
	major, _, n, ok := r.head()
	if !ok || major != majorMap {
		return ids
	}
	for range n {
		key, ok := readCBORText(r)
		if !ok {
			return ids
		}
		switch key {
		case "type":
			ids.typ, ok = cborTextOrSkip(r)
		case "response_id":
			ids.responseID, ok = cborTextOrSkip(r)
		case "session_id":
			ids.sessionID, ok = cborTextOrSkip(r)
		case "actions":
			ok = readCBORCallIDs(r, &ids)
		default:
			ok = skipCBOR(r, 1)
		}
		if !ok {
			return ids
		}
	}
	return ids
}

// readCBORCallIDs reads the call_id of each action of an actions array.
func readCBORCallIDs(r *cborReader, ids *commandIDs) bool {
	major, _, n, ok := r.head()
	if !ok {
		return false
	}
	if major != majorArray {
		return skipCBORContent(r, major, n)
	}
	for range n {
		major, _, pairs, ok := r.head()
		if !ok {
			return false
		}
		if major != majorMap {
			if !skipCBORContent(r, major, pairs) {
				return false
			}
			continue
		}
		for range pairs {
			key, ok := readCBORText(r)
			if !ok {
				return false
			}
			if key != "call_id" {
				if !skipCBOR(r, 1) {
					return false
				}
				continue
			}
			id, ok := cborTextOrSkip(r)
			if !ok {
				return false
			}
			if id != "" {
				ids.callIDs = append(ids.callIDs, id)
			}
		}
	}
	ids.actions = true
	return true
}

// readCBORText reads a text string.
func readCBORText(r *cborReader) (string, bool) {
	major, _, n, ok := r.head()
	if !ok || major != majorText {
		return "", false
	}
	b, ok := r.take(n)
	return string(b), ok
}

// cborTextOrSkip reads a text string, or steps over a value of another
// kind, giving "".
func cborTextOrSkip(r *cborReader) (string, bool) {
	major, _, n, ok := r.head()
	if !ok {
		return "", false
	}
	if major == majorText {
		b, ok := r.take(n)
		return string(b), ok
	}
	return "", skipCBORContent(r, major, n)
}

// skipCBOR steps over n data items. It keeps a count, not a stack, so no
// nesting makes it recurse; a count the rest of the frame cannot hold,
// one byte an item at least, ends it.
func skipCBOR(r *cborReader, n uint64) bool {
	for n > 0 {
		major, _, arg, ok := r.head()
		if !ok {
			return false
		}
		n--
		switch major {
		case majorBytes, majorText:
			if _, ok := r.take(arg); !ok {
				return false
			}
		case majorArray:
			n += arg
		case majorMap:
			n += 2 * arg
		case majorTag:
			n++
		}
		if n > uint64(len(r.data)-r.off) {
			return false
		}
	}
	return true
}

// skipCBORContent steps over what follows a head already read.
func skipCBORContent(r *cborReader, major byte, arg uint64) bool {
	switch major {
	case majorBytes, majorText:
		_, ok := r.take(arg)
		return ok
	case majorArray:
		return arg <= uint64(len(r.data)-r.off) && skipCBOR(r, arg)
	case majorMap:
		return arg <= uint64(len(r.data)-r.off)/2 && skipCBOR(r, 2*arg)
	case majorTag:
		return skipCBOR(r, 1)
	}
	return true
}

func readJSONCommandIDs(data []byte) commandIDs {
	var ids commandIDs
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ids
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ids
		}
		ok := true
		switch tok {
		case "type":
			ids.typ, ok = jsonString(dec)
		case "response_id":
			ids.responseID, ok = jsonString(dec)
		case "session_id":
			ids.sessionID, ok = jsonString(dec)
		case "actions":
			ok = readJSONCallIDs(dec, &ids)
		default:
			ok = skipJSON(dec)
		}
		if !ok {
			return ids
		}
	}
	return ids
}

// readJSONCallIDs reads the call_id of each action of an actions array.
func readJSONCallIDs(dec *json.Decoder, ids *commandIDs) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	if tok != json.Delim('[') {
		return skipJSONRest(dec, tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if tok != json.Delim('{') {
			if !skipJSONRest(dec, tok) {
				return false
			}
			continue
		}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return false
			}
			if key != "call_id" {
				if !skipJSON(dec) {
					return false
				}
				continue
			}
			id, ok := jsonString(dec)
			if !ok {
				return false
			}
			if id != "" {
				ids.callIDs = append(ids.callIDs, id)
			}
		}
		if _, err := dec.Token(); err != nil { // the action's '}'
			return false
		}
	}
	if _, err := dec.Token(); err != nil { // the actions' ']'
		return false
	}
	ids.actions = true
	return true
}

// jsonString reads a string, or steps over a value of another kind,
// giving "".
func jsonString(dec *json.Decoder) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	if s, ok := tok.(string); ok {
		return s, true
	}
	return "", skipJSONRest(dec, tok)
}

// skipJSON steps over one value.
func skipJSON(dec *json.Decoder) bool {
	tok, err := dec.Token()
	return err == nil && skipJSONRest(dec, tok)
}

// skipJSONRest steps over the rest of a value whose first token was tok.
// It keeps a count, not a stack, so no nesting makes it recurse.
func skipJSONRest(dec *json.Decoder, tok json.Token) bool {
	depth := 0
	for {
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
		var err error
		if tok, err = dec.Token(); err != nil {
			return false
		}
	}
}
