// Package audit is the store's append-only audit log: who ran what on
// which device, with which module, which parameters, and the outcome;
// and who changed which device or identity, and how. The store writes a
// command's entries when the command ends (its Command carries them); the
// rest is written and read here.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/identities"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Entry is one line of the audit log.
type Entry struct {
	Seq   int64
	At    time.Time
	Actor string
	// By is the operator identity, and the token, it was done for.
	identities.By
	// Action is what was done, for a change to devices or identities
	// ("device.enroll", "identity.add"...); empty for a tool call.
	Action       string
	DeviceID     string
	SessionID    string
	ResponseID   string
	CallID       string
	Tool         string // tool_type::tool_name, or the bare name the command gave
	Namespace    string
	ModuleSHA256 string
	Parameters   json.RawMessage
	Outcome      protocol.ResultStatus
	Error        string
	// Late marks the device's results arriving after the command had
	// failed; the command's earlier entries show that failure.
	Late bool
}

// maxValue is the longest string parameter the audit log keeps as is.
// The log is kept forever: a module being deployed, a chunk of an agent
// release or a file being written is recorded by its size and hash
// instead.
const maxValue = 4 << 10

// Parameters are a call's parameters as the log keeps them.
func Parameters(params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		switch s := encodedonce.Unwrap(v).(type) {
		case string:
			if len(s) > maxValue {
				v = bytesDigest([]byte(s))
			}
		case []byte: // a chunk of an agent release
			if len(s) > maxValue {
				v = bytesDigest(s)
			}
		}
		out[k] = v
	}
	return out
}

// bytesDigest stands for b in the log.
func bytesDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("<%d bytes, sha256 %s>", len(b), hex.EncodeToString(sum[:]))
}

// Actions are actions as a command's record keeps them: a chunk
// of an agent release (stage_release) by its size and hash, as the audit
// log keeps it, not the half megabyte a device was sent, kept for days
// for every device. A rollout sends a chunk again from the release.
func Actions(actions []protocol.Command) []protocol.Command {
	for i, a := range actions {
		if a.ToolName != protocol.StageReleaseName {
			continue
		}
		out := slices.Clone(actions)
		for j := i; j < len(out); j++ {
			if out[j].ToolName == protocol.StageReleaseName {
				out[j].Parameters = Parameters(out[j].Parameters)
			}
		}
		return out
	}
	return actions
}

// Call is the entry of one action of a command that ended.
type Call struct {
	Actor      string
	By         identities.By
	DeviceID   string
	SessionID  string
	ResponseID string
	Action     protocol.Command
	// Namespace and ModuleSHA256 say which tool ran.
	Namespace, ModuleSHA256 string
	Result                  protocol.Result
	Late                    bool
}

// Writes are a write's additions to the log.
type Writes struct{ t sqlrow.Writer }

// WritesIn are the additions of the write whose transaction is t.
func WritesIn(t sqlrow.Writer) Writes { return Writes{t} }

// Call records one action of a command that ended, at.
func (w Writes) Call(c Call, at string) error {
	a := c.Action
	params, err := encodedonce.JSON(Parameters(a.Parameters))
	if err != nil {
		return fmt.Errorf("store: audit %s: parameters: %w", a.CallID, err)
	}
	tool := a.ToolName
	if a.ToolType != "" {
		tool = protocol.ToolKey(a.ToolType, a.ToolName)
	}
	_, err = w.t.Exec(
		`INSERT INTO audit (at, actor, identity, token_id, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		at, c.Actor, c.By.Identity, c.By.TokenID, c.DeviceID, c.SessionID, c.ResponseID, a.CallID, tool, c.Namespace, c.ModuleSHA256,
		string(params), string(c.Result.Status), c.Result.Error, c.Late)
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", a.CallID, err)
	}
	return nil
}

// Append records a change to devices or identities: e.Action, by
// e.By, with e.DeviceID and e.Parameters saying what changed. The time
// and sequence number are the store's.
func (w Writes) Append(e Entry) error {
	params, err := json.Marshal(e.Parameters)
	if err != nil {
		return fmt.Errorf("store: audit %s: parameters: %w", e.Action, err)
	}
	_, err = w.t.Exec(
		`INSERT INTO audit (at, actor, identity, token_id, action, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late)
		 VALUES (?, ?, ?, ?, ?, ?, '', '', '', '', '', '', ?, ?, '', 0)`,
		sqlrow.Now(), e.Actor, e.Identity, e.TokenID, e.Action, e.DeviceID, string(params), string(protocol.ResultSuccess))
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", e.Action, err)
	}
	return nil
}

// Filter selects audit entries; empty fields match everything.
type Filter struct {
	DeviceID  string
	SessionID string
	Identity  string
	// Since, if set, keeps the entries written at or after it.
	Since time.Time
	// OnlyDevices, if not nil, keeps the entries about these devices
	// alone: what a scoped reader may see.
	OnlyDevices []string
	// AfterSeq pages: only entries with a larger Seq.
	AfterSeq int64
	Limit    int
}

// Reads are the reads of the log.
type Reads struct {
	r sqlrow.Reader
	// jsonTexts is the dialect's SELECT of the strings of the JSON
	// array ?.
	jsonTexts string
}

// ReadsOf are the reads of the log through r, whose dialect selects the
// strings of a JSON array with jsonTexts.
func ReadsOf(r sqlrow.Reader, jsonTexts string) Reads { return Reads{r, jsonTexts} }

// List lists audit entries in the order they were written.
func (q Reads) List(ctx context.Context, f Filter) ([]Entry, error) {
	var since string
	if !f.Since.IsZero() {
		since = sqlrow.FormatTime(f.Since)
	}
	only, err := json.Marshal(sqlrow.List(f.OnlyDevices))
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	onlySome := 0
	if f.OnlyDevices != nil {
		onlySome = 1
	}
	rows, err := q.r.ReadRows(ctx,
		`SELECT seq, at, actor, identity, token_id, action, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late
		 FROM audit WHERE seq > ? AND (? = '' OR device_id = ?) AND (? = '' OR session_id = ?) AND (? = '' OR identity = ?)
		 AND (? = '' OR at >= ?) AND (? = 0 OR device_id IN (`+q.jsonTexts+`)) ORDER BY seq LIMIT ?`,
		f.AfterSeq, f.DeviceID, f.DeviceID, f.SessionID, f.SessionID, f.Identity, f.Identity,
		since, since, onlySome, string(only), f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return sqlrow.Collect(rows, scanEntry, []Entry{})
}

func scanEntry(row sqlrow.Row) (Entry, error) {
	var (
		e               Entry
		at, params, out string
	)
	if err := row.Scan(&e.Seq, &at, &e.Actor, &e.Identity, &e.TokenID, &e.Action, &e.DeviceID, &e.SessionID, &e.ResponseID, &e.CallID, &e.Tool,
		&e.Namespace, &e.ModuleSHA256, &params, &out, &e.Error, &e.Late); err != nil {
		return Entry{}, fmt.Errorf("store: audit: %w", err)
	}
	e.At, _ = time.Parse(time.RFC3339Nano, at)
	e.Parameters, e.Outcome = json.RawMessage(params), protocol.ResultStatus(out)
	return e, nil
}
