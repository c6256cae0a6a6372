package store

import (
	"github.com/edgeaip/edgeaip/server/internal/store/internal/audit"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// The append-only audit log: see package audit.
type (
	// AuditEntry is one line of the log: who ran what on which device,
	// with which module, which parameters, and the outcome; or, with an
	// Action, who changed which device or identity, and how.
	AuditEntry = audit.Entry
	// AuditFilter selects audit entries; empty fields match everything.
	AuditFilter = audit.Filter
	// AuditWrites are a write's additions to the log. Reached by
	// [Tx.Audit]; they belong to the write's transaction.
	AuditWrites = audit.Writes
	// AuditReads are the reads of the log. Reached by [Store.Audit].
	AuditReads = audit.Reads
)

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
		call := audit.Call{Actor: c.Actor, By: By{Identity: c.Identity, TokenID: c.TokenID}, DeviceID: c.DeviceID, SessionID: c.SessionID,
			ResponseID: c.ResponseID, Action: a, Namespace: ref.Namespace, ModuleSHA256: ref.SHA256, Result: r, Late: c.Late}
		if err := t.Audit().Call(call, at); err != nil {
			return err
		}
	}
	return nil
}

// Audit are this write's changes to what [AuditWrites] keep.
func (t *Tx) Audit() AuditWrites { return audit.WritesIn(partTx{t}) }

// Audit are the reads of what [AuditReads] keep.
func (s *Store) Audit() AuditReads { return audit.ReadsOf(partReader{s}, s.dialect.jsonTexts()) }
