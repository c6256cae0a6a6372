package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"

	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// AuditEntry is one line of the append-only audit log: who ran what on
// which device, with which module, which parameters, and the outcome; or,
// with an Action, who changed which device or identity, and how.
type AuditEntry struct {
	Seq   int64
	At    time.Time
	Actor string
	// By is the operator identity, and the token, it was done for.
	By
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

// appendAudit writes one entry per action of a command that just ended.
func (t *Tx) appendAudit(c *Command) error {
	at := sqlrow.Now()
	for i, a := range c.Actions {
		var ref ToolRef
		if i < len(c.Tools) {
			ref = c.Tools[i]
		}
		r := c.Results[i]
		if r.Namespace != "" {
			ref.Namespace = r.Namespace
		}
		params, err := encodedonce.JSON(auditParameters(a.Parameters))
		if err != nil {
			return fmt.Errorf("store: audit %s: parameters: %w", a.CallID, err)
		}
		tool := a.ToolName
		if a.ToolType != "" {
			tool = protocol.ToolKey(a.ToolType, a.ToolName)
		}
		_, err = t.exec(
			`INSERT INTO audit (at, actor, identity, token_id, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			at, c.Actor, c.Identity, c.TokenID, c.DeviceID, c.SessionID, c.ResponseID, a.CallID, tool, ref.Namespace, ref.SHA256,
			string(params), string(r.Status), r.Error, c.Late)
		if err != nil {
			return fmt.Errorf("store: audit %s: %w", a.CallID, err)
		}
	}
	return nil
}

// maxAuditValue is the longest string parameter the audit log keeps as
// is. The log is kept forever: a module being deployed or a file being
// written is recorded by its size and hash instead.
const maxAuditValue = 4 << 10

func auditParameters(params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		switch s := encodedonce.Unwrap(v).(type) {
		case string:
			if len(s) > maxAuditValue {
				v = bytesDigest([]byte(s))
			}
		case []byte: // a chunk of an agent release
			if len(s) > maxAuditValue {
				v = bytesDigest(s)
			}
		}
		out[k] = v
	}
	return out
}

// bytesDigest stands for b in the audit log.
func bytesDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("<%d bytes, sha256 %s>", len(b), hex.EncodeToString(sum[:]))
}

// Append records a change to devices or identities: e.Action, by
// e.By, with e.DeviceID and e.Parameters saying what changed. The time
// and sequence number are the store's.
func (w AuditWrites) Append(e AuditEntry) error {
	params, err := json.Marshal(e.Parameters)
	if err != nil {
		return fmt.Errorf("store: audit %s: parameters: %w", e.Action, err)
	}
	_, err = w.t.exec(
		`INSERT INTO audit (at, actor, identity, token_id, action, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late)
		 VALUES (?, ?, ?, ?, ?, ?, '', '', '', '', '', '', ?, ?, '', 0)`,
		sqlrow.Now(), e.Actor, e.Identity, e.TokenID, e.Action, e.DeviceID, string(params), string(protocol.ResultSuccess))
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", e.Action, err)
	}
	return nil
}

// AuditFilter selects audit entries; empty fields match everything.
type AuditFilter struct {
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

// List lists audit entries in the order they were written.
func (q AuditReads) List(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var since string
	if !f.Since.IsZero() {
		since = sqlrow.FormatTime(f.Since)
	}
	only, err := json.Marshal(sqlrow.List(f.OnlyDevices))
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	rows, err := q.s.readRows(ctx,
		`SELECT seq, at, actor, identity, token_id, action, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late
		 FROM audit WHERE seq > ? AND (? = '' OR device_id = ?) AND (? = '' OR session_id = ?) AND (? = '' OR identity = ?)
		 AND (? = '' OR at >= ?) AND (? = 0 OR device_id IN (`+q.s.dialect.jsonTexts()+`)) ORDER BY seq LIMIT ?`,
		f.AfterSeq, f.DeviceID, f.DeviceID, f.SessionID, f.SessionID, f.Identity, f.Identity,
		since, since, boolInt(f.OnlyDevices != nil), string(only), f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var (
			e          AuditEntry
			at, params string
			outcome    string
		)
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Identity, &e.TokenID, &e.Action, &e.DeviceID, &e.SessionID, &e.ResponseID, &e.CallID, &e.Tool,
			&e.Namespace, &e.ModuleSHA256, &params, &outcome, &e.Error, &e.Late); err != nil {
			return nil, fmt.Errorf("store: audit: %w", err)
		}
		e.At, _ = time.Parse(time.RFC3339Nano, at)
		e.Parameters, e.Outcome = json.RawMessage(params), protocol.ResultStatus(outcome)
		out = append(out, e)
	}
	return out, rows.Err()
}

// AuditWrites are a write's additions to the append-only audit log.
// Reached by [Tx.Audit]; they belong to the write's transaction.
type AuditWrites struct{ t *Tx }

// Audit are this write's changes to what [AuditWrites] keep.
func (t *Tx) Audit() AuditWrites { return AuditWrites{t} }

// AuditReads are the reads of the audit log.
// Reached by [Store.Audit].
type AuditReads struct{ s *Store }

// Audit are the reads of what [AuditReads] keep.
func (s *Store) Audit() AuditReads { return AuditReads{s} }
