// Package schema is the store's schema: the migrations that build it,
// in order, in SQLite's SQL and in PostgreSQL's. A database's schema
// version counts the migrations applied to it, so a released migration
// never changes: existing data dirs would no longer match it. A change to
// the schema is a new migration at the end. The store applies them
// (store.Open); see the store's RATIONALE.md, "Two databases, one
// store", for how to write one.
package schema

import (
	"fmt"
	"strings"
)

// Count is how many migrations there are: a database whose schema
// version is Count is up to date.
func Count() int { return len(migrations) }

// SQLite is the SQL of migration i, counted from 0, on SQLite.
func SQLite(i int) string { return migrations[i] }

// Postgres is the SQL of migration i, counted from 0, on PostgreSQL.
func Postgres(i int) string {
	if q, ok := postgresMigrations[i]; ok {
		return q
	}
	return migrations[i]
}

// migrations are applied in order, each once; the dialect counts those
// done (SQLite's PRAGMA user_version, PostgreSQL's schema_version table).
// Each is SQL both databases take, unless postgresMigrations has
// PostgreSQL's.
var migrations = []string{
	`CREATE TABLE devices (
		id          TEXT PRIMARY KEY,
		token_hash  TEXT NOT NULL UNIQUE,
		labels      TEXT NOT NULL DEFAULT '{}',
		created_at  TEXT NOT NULL,
		last_seen   TEXT,
		info        TEXT
	);
	CREATE TABLE commands (
		response_id TEXT PRIMARY KEY,
		device_id   TEXT NOT NULL,
		session_id  TEXT NOT NULL,
		actions     TEXT NOT NULL,
		status      TEXT NOT NULL,
		results     TEXT,
		error       TEXT,
		created_at  TEXT NOT NULL,
		finished_at TEXT
	);
	CREATE INDEX commands_device ON commands(device_id, created_at);`,

	// Sessions, command provenance for the audit log, and the audit log,
	// which triggers keep append-only.
	sessionsSQL + auditSQLite,

	// Fleets: a fleet is a session whose children run its plan, one per
	// device.
	`ALTER TABLE sessions ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
	CREATE INDEX sessions_parent ON sessions(parent_id);`,

	// Times in sqlrow's timeLayout, so that their text sorts as they do. The audit
	// log, append-only and ordered by seq, keeps the times it has.
	fixedWidthTimes("devices", "created_at", "last_seen") +
		fixedWidthTimes("sessions", "created_at", "started_at", "finished_at") +
		fixedWidthTimes("commands", "created_at", "finished_at"),

	// Task listings page by (created_at, id), newest first.
	`CREATE INDEX sessions_created ON sessions(created_at, id);`,

	// Idempotency keys: the requests that started a session, by who sent
	// them and their Idempotency-Key, so that a repeat runs nothing again.
	`CREATE TABLE idempotency_keys (
		identity    TEXT NOT NULL,
		key         TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		session_id  TEXT NOT NULL,
		response    TEXT,
		created_at  TEXT NOT NULL,
		PRIMARY KEY (identity, key)
	);
	CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);`,

	// The task name a client sent, when the server had to sanitize it
	// (a UFO galaxy client's galaxy/<task>/<name>): task_name holds the
	// sanitized name, which task_result looks up.
	`ALTER TABLE sessions ADD COLUMN original_task_name TEXT NOT NULL DEFAULT '';`,

	// Device credentials. A token rotation the operator asked for and the
	// device has not confirmed, at most one per device; the hash of the
	// token last sent for it works until a newer one is sent. Tokens a
	// confirmed rotation replaced, kept to refuse them by name, working
	// until their grace ends. The wire of a device's last link, since a
	// JSON link cannot carry a new token. Device certificates, by their
	// SHA-256: those the server signed and those devices presented; a
	// revoked device's stay, revoked, so that re-enrolling its id does not
	// make them good again.
	`CREATE TABLE token_rotations (
		device_id    TEXT PRIMARY KEY,
		grace_ns     INTEGER NOT NULL,
		requested_at TEXT NOT NULL,
		sent_hash    TEXT UNIQUE,
		sent_at      TEXT,
		error        TEXT NOT NULL DEFAULT ''
	);
	CREATE TABLE retired_tokens (
		hash       TEXT PRIMARY KEY,
		device_id  TEXT NOT NULL,
		retired_at TEXT NOT NULL,
		until      TEXT NOT NULL
	);
	CREATE INDEX retired_tokens_device ON retired_tokens(device_id);
	ALTER TABLE devices ADD COLUMN wire TEXT NOT NULL DEFAULT '';
	CREATE TABLE device_certificates (
		sha256     TEXT PRIMARY KEY,
		device_id  TEXT NOT NULL,
		serial     TEXT NOT NULL,
		not_after  TEXT NOT NULL,
		signed     INTEGER NOT NULL,
		created_at TEXT NOT NULL,
		revoked_at TEXT
	);
	CREATE INDEX device_certificates_device ON device_certificates(device_id);`,

	// Operator identities, each with a role, a scope (a device selector
	// and tool patterns; empty: none) and tokens kept as hashes; the
	// dashboard's logins, each made with a token, which end with it; and
	// who asked, by identity and token, on tasks, commands and the audit
	// log. An audit entry with an action records a change to devices or
	// identities rather than a tool call. Rows from before name no one.
	`CREATE TABLE identities (
		name       TEXT PRIMARY KEY,
		role       TEXT NOT NULL,
		devices    TEXT NOT NULL DEFAULT '',
		tools      TEXT NOT NULL DEFAULT '[]',
		created_at TEXT NOT NULL
	);
	CREATE TABLE identity_tokens (
		id         TEXT PRIMARY KEY,
		identity   TEXT NOT NULL REFERENCES identities(name) ON DELETE CASCADE,
		hash       TEXT NOT NULL UNIQUE,
		created_at TEXT NOT NULL,
		expires_at TEXT
	);
	CREATE INDEX identity_tokens_identity ON identity_tokens(identity);
	CREATE TABLE logins (
		hash       TEXT PRIMARY KEY,
		token_id   TEXT NOT NULL REFERENCES identity_tokens(id) ON DELETE CASCADE,
		created_at TEXT NOT NULL,
		expires_at TEXT NOT NULL
	);
	CREATE INDEX logins_token ON logins(token_id);
	CREATE INDEX logins_expires ON logins(expires_at);
	ALTER TABLE sessions ADD COLUMN identity TEXT NOT NULL DEFAULT '';
	ALTER TABLE sessions ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE sessions ADD COLUMN selector TEXT NOT NULL DEFAULT '';
	ALTER TABLE commands ADD COLUMN identity TEXT NOT NULL DEFAULT '';
	ALTER TABLE commands ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE audit ADD COLUMN identity TEXT NOT NULL DEFAULT '';
	ALTER TABLE audit ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE audit ADD COLUMN action TEXT NOT NULL DEFAULT '';
	CREATE INDEX audit_identity ON audit(identity, seq);`,

	// Calls that applications on a device made through the agent's own
	// MCP endpoint, which the device reports (local_call) until the server
	// acknowledges it: one entry each, however often it is reported.
	`CREATE UNIQUE INDEX audit_local_calls ON audit(device_id, call_id) WHERE actor = 'local';`,

	// Cluster mode (PostgreSQL only; on SQLite the tables exist, unused):
	// each node's lease on its id, kept alive by heartbeats on
	// PostgreSQL's clock, and who holds each device's link, with a
	// fencing epoch. A released lease keeps its row (node_id '') so that
	// its epoch only grows. Not copied by Copy: they are what running
	// nodes hold, not the fleet (see clusterTables).
	`CREATE TABLE cluster_nodes (
		node_id      TEXT PRIMARY KEY,
		epoch        BIGINT NOT NULL,
		version      INTEGER NOT NULL,
		address      TEXT NOT NULL DEFAULT '',
		state        TEXT NOT NULL,
		started_at   TIMESTAMPTZ NOT NULL,
		heartbeat_at TIMESTAMPTZ NOT NULL
	);
	CREATE TABLE device_leases (
		device_id  TEXT PRIMARY KEY,
		node_id    TEXT NOT NULL DEFAULT '',
		node_epoch BIGINT NOT NULL,
		epoch      BIGINT NOT NULL,
		taken_at   TIMESTAMPTZ NOT NULL
	);
	CREATE INDEX device_leases_node ON device_leases(node_id);`,

	// Fewer index writes per command (server/RATIONALE.md, "Pages per
	// command"). SQLite reads the audit log by seq alone: its query's
	// filters are "? = '' OR column = ?", which SQLite plans before it
	// knows the values, so its indexes by device and by identity were
	// written and never read (PostgreSQL, whose custom plans are made
	// with the values, keeps them).
	fewerIndexes + `
	DROP INDEX audit_device;
	DROP INDEX audit_identity;`,

	// Cluster mode: each unfinished session belongs to the node that runs
	// it, at that node's fencing epoch (a single node's are ''/0), so that
	// a node fails or adopts only its own and a survivor adopts a dead
	// node's in one fenced UPDATE. A command keeps its timeout and whether
	// it waits for its device, and a fleet what it runs on (its devices in
	// order, its concurrency and abort threshold), for the node that runs
	// them on.
	`ALTER TABLE sessions ADD COLUMN owner_node TEXT NOT NULL DEFAULT '';
	ALTER TABLE sessions ADD COLUMN owner_epoch BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE sessions ADD COLUMN fleet TEXT;
	CREATE INDEX sessions_owner ON sessions(owner_node, owner_epoch) WHERE state IN ('created', 'running');
	ALTER TABLE commands ADD COLUMN timeout_ms BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE commands ADD COLUMN wait_for_device INTEGER NOT NULL DEFAULT 0;`,

	// Each device's labels, one row each, indexed by label, so that the
	// devices a selector picks (a scope, a fleet) are read from the index
	// instead of from every device's row. devices.labels stays the
	// device's record of them; labels are set only at enrollment.
	deviceLabelsSQL + `
	INSERT INTO device_labels (device_id, key, value) SELECT d.id, j.key, j.value FROM devices d, json_each(d.labels) j;`,

	// Fewer B-trees per command (server/RATIONALE.md, "Pages per
	// command"). The queries of unfinished sessions by owner search
	// sessions_state, by their states, as UnfinishedOwners did already:
	// sessions_owner, written when a session starts and again when it
	// ends, goes. So does sessions_finished, written when a session
	// ends: expiry searches sessions_created, since a session ends after
	// it starts. sessions_task holds the named sessions alone: a single
	// command's has no name, and every query by name has one. On SQLite
	// the audit log is rebuilt without AUTOINCREMENT, whose
	// sqlite_sequence row every entry updated, a B-tree page more per
	// command: its rows are never deleted (its triggers), so the largest
	// seq plus one, SQLite's rowid, is the sequence AUTOINCREMENT kept.
	dropSessionIndexes + auditRowid,

	// Rollouts (server/RATIONALE.md, "Rollouts"): the modules they put on
	// devices, kept by digest where every node reads them; each rollout,
	// its revisions, and each selected device's state in it.
	fmt.Sprintf(rolloutsSQL, "BLOB"),

	// Agent releases (issue 40): each version's binary for an OS and
	// architecture, kept by digest in modules beside the modules rollouts
	// put on devices, with its size, the key that signed it and the
	// signature (base64). One binary per version and platform: a
	// different one under the same three is refused, not replaced.
	`CREATE TABLE releases (
		version    TEXT NOT NULL,
		os         TEXT NOT NULL,
		arch       TEXT NOT NULL,
		sha256     TEXT NOT NULL REFERENCES modules(sha256),
		size       BIGINT NOT NULL,
		key_id     TEXT NOT NULL,
		signature  TEXT NOT NULL,
		created_at TEXT NOT NULL,
		created_by TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (version, os, arch)
	);`,

	// Tokens revoked, a device's or an identity's, by their hash, with
	// whose they were and when: a caller who presents one is told it was
	// revoked, and when (issue 43). One row a revoked token, kept.
	`CREATE TABLE revoked_tokens (
		hash       TEXT PRIMARY KEY,
		kind       TEXT NOT NULL,
		owner      TEXT NOT NULL,
		revoked_at TEXT NOT NULL
	);`,
}

// rolloutsSQL is migration 16, with the type of a module's bytes.
const rolloutsSQL = `CREATE TABLE modules (
		sha256     TEXT PRIMARY KEY,
		tool       TEXT NOT NULL,
		size       BIGINT NOT NULL,
		body       %s NOT NULL,
		created_at TEXT NOT NULL
	);
	CREATE TABLE rollouts (
		name           TEXT PRIMARY KEY,
		revision       INTEGER NOT NULL,
		latest         INTEGER NOT NULL,
		state          TEXT NOT NULL,
		wave           INTEGER NOT NULL,
		state_since    TEXT NOT NULL,
		reason         TEXT NOT NULL DEFAULT '',
		leader_node    TEXT NOT NULL DEFAULT '',
		leader_epoch   BIGINT NOT NULL DEFAULT 0,
		updated_at     TEXT NOT NULL
	);
	CREATE TABLE rollout_revisions (
		name       TEXT NOT NULL REFERENCES rollouts(name) ON DELETE CASCADE,
		revision   INTEGER NOT NULL,
		spec       TEXT NOT NULL,
		tools      TEXT NOT NULL,
		outcome    TEXT NOT NULL DEFAULT '',
		created_by TEXT NOT NULL DEFAULT '',
		created_at TEXT NOT NULL,
		PRIMARY KEY (name, revision)
	);
	CREATE TABLE rollout_devices (
		name       TEXT NOT NULL REFERENCES rollouts(name) ON DELETE CASCADE,
		device_id  TEXT NOT NULL,
		revision   INTEGER NOT NULL,
		wave       INTEGER NOT NULL,
		state      TEXT NOT NULL,
		applied    INTEGER NOT NULL DEFAULT 0,
		session_id TEXT NOT NULL DEFAULT '',
		error      TEXT NOT NULL DEFAULT '',
		updated_at TEXT NOT NULL,
		PRIMARY KEY (name, device_id)
	);
	CREATE INDEX rollout_devices_device ON rollout_devices(device_id);`

// deviceLabelsSQL is the SQL of migration 14 that both databases take.
const deviceLabelsSQL = `CREATE TABLE device_labels (
		device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
		key       TEXT NOT NULL,
		value     TEXT NOT NULL,
		PRIMARY KEY (device_id, key)
	);
	CREATE INDEX device_labels_pick ON device_labels(key, value, device_id);`

// dropSessionIndexes is the SQL of migration 15 that both databases
// take. A query by name also says that the name is not empty, which
// lets both use the partial sessions_task: the name's equality alone,
// planned before the name is known (SQLite's plans, PostgreSQL's
// generic ones), does not say so.
const dropSessionIndexes = `DROP INDEX sessions_owner;
	DROP INDEX sessions_finished;
	DROP INDEX sessions_task;
	CREATE INDEX sessions_task ON sessions(task_name, created_at) WHERE task_name <> '';`

// auditRowid is the rest of migration 15 on SQLite: the audit log, its
// rows and seqs kept, as a rowid table; its triggers and its index of
// local calls again. The columns keep their order.
const auditRowid = `
	DROP TRIGGER audit_no_update;
	DROP TRIGGER audit_no_delete;
	ALTER TABLE audit RENAME TO audit_autoincrement;
	CREATE TABLE audit (
		seq           INTEGER PRIMARY KEY,
` + auditColumnDefs + `,
		identity      TEXT NOT NULL DEFAULT '',
		token_id      TEXT NOT NULL DEFAULT '',
		action        TEXT NOT NULL DEFAULT ''
	);
	INSERT INTO audit (seq, at, actor, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late, identity, token_id, action)
		SELECT seq, at, actor, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late, identity, token_id, action
		FROM audit_autoincrement;
	DROP TABLE audit_autoincrement;
	CREATE UNIQUE INDEX audit_local_calls ON audit(device_id, call_id) WHERE actor = 'local';` + auditTriggers

// auditTriggers keep SQLite's audit log append-only.
const auditTriggers = `
	CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
		BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
	CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
		BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;`

// fewerIndexes is the SQL of migration 12 that both databases take:
// commands by device and sessions by parent were read by no query; the
// commands waiting for results and the sessions that ended are the only
// rows their queries read (FailInterrupted, the expiry of old sessions),
// so only they are indexed, and a command that ends or a session that
// starts writes no entry there.
const fewerIndexes = `DROP INDEX commands_device;
	DROP INDEX sessions_parent;
	DROP INDEX commands_status;
	CREATE INDEX commands_pending ON commands(response_id) WHERE status = 'pending';
	DROP INDEX sessions_finished;
	CREATE INDEX sessions_finished ON sessions(finished_at) WHERE finished_at IS NOT NULL;`

// fixedWidthTimes is the SQL that rewrites columns of table from
// time.RFC3339Nano in UTC, which drops the fraction's trailing zeros
// ("2006-01-02T15:04:05.1Z"), to sqlrow's timeLayout: the seconds, then the
// fraction padded to nine digits.
func fixedWidthTimes(table string, columns ...string) string {
	var b strings.Builder
	for _, c := range columns {
		fmt.Fprintf(&b, `UPDATE %[1]s SET %[2]s = substr(%[2]s, 1, 19) || '.' ||
			substr(CASE WHEN substr(%[2]s, 20, 1) = '.' THEN substr(%[2]s, 21, length(%[2]s) - 21) ELSE '' END || '000000000', 1, 9) || 'Z'
			WHERE %[2]s GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]*Z' AND length(%[2]s) < 30;
		`, table, c)
	}
	return b.String()
}

// sessionsSQL is migration 2's SQL that both databases take: sessions,
// and the provenance of commands for the audit log.
const sessionsSQL = `CREATE TABLE sessions (
		id             TEXT PRIMARY KEY,
		task_name      TEXT NOT NULL,
		device_id      TEXT NOT NULL,
		requester_kind TEXT NOT NULL,
		requester_id   TEXT NOT NULL,
		kind           TEXT NOT NULL,
		state          TEXT NOT NULL,
		plan           TEXT,
		result         TEXT,
		error          TEXT,
		created_at     TEXT NOT NULL,
		started_at     TEXT,
		finished_at    TEXT
	);
	CREATE INDEX sessions_task ON sessions(task_name, created_at);
	CREATE INDEX sessions_state ON sessions(state, created_at);
	CREATE INDEX sessions_finished ON sessions(finished_at);
	ALTER TABLE commands ADD COLUMN actor TEXT NOT NULL DEFAULT '';
	ALTER TABLE commands ADD COLUMN step INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE commands ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE commands ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
	ALTER TABLE commands ADD COLUMN late INTEGER NOT NULL DEFAULT 0;
	CREATE INDEX commands_session ON commands(session_id);
	CREATE INDEX commands_status ON commands(status);`

// auditSQLite is the rest of migration 2 on SQLite: the audit log, which
// triggers keep append-only.
const auditSQLite = `
	CREATE TABLE audit (
		seq           INTEGER PRIMARY KEY AUTOINCREMENT,
` + auditColumns + auditTriggers

// auditColumns are the audit log's columns of migration 2 but its key,
// and its index.
const auditColumns = auditColumnDefs + `
	);
	CREATE INDEX audit_device ON audit(device_id, seq);`

// auditColumnDefs are the audit log's first columns, but its key.
const auditColumnDefs = `		at            TEXT NOT NULL,
		actor         TEXT NOT NULL,
		device_id     TEXT NOT NULL,
		session_id    TEXT NOT NULL,
		response_id   TEXT NOT NULL,
		call_id       TEXT NOT NULL,
		tool          TEXT NOT NULL,
		namespace     TEXT NOT NULL,
		module_sha256 TEXT NOT NULL,
		parameters    TEXT NOT NULL,
		outcome       TEXT NOT NULL,
		error         TEXT NOT NULL,
		late          INTEGER NOT NULL`

// postgresMigrations are PostgreSQL's SQL for the migrations, by index
// in migrations, whose SQLite SQL it does not take or would take with
// another meaning; every other migration is the same SQL on both. See
// RATIONALE.md, "Two databases, one store", for how to write one.
var postgresMigrations = map[int]string{
	// An identity column for SQLite's AUTOINCREMENT, and a trigger
	// function for its RAISE.
	1: sessionsSQL + `
	CREATE TABLE audit (
		seq           BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
` + auditColumns + `
	CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $$;
	CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
		FOR EACH ROW EXECUTE FUNCTION audit_append_only();
	CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
		FOR EACH ROW EXECUTE FUNCTION audit_append_only();`,

	// No rows in PostgreSQL predate fixed-width times: a store is copied
	// there from SQLite after its migrations (aip-server store copy).
	3: `SELECT 'times are written with a fixed width from the start'`,

	// A rotation's grace in nanoseconds outgrows PostgreSQL's 32-bit
	// INTEGER.
	7: migrations[7] + `
	ALTER TABLE token_rotations ALTER COLUMN grace_ns TYPE BIGINT;`,

	// PostgreSQL's audit indexes may serve its filters by device and
	// identity.
	11: fewerIndexes,

	// PostgreSQL's JSON object as rows.
	13: deviceLabelsSQL + `
	INSERT INTO device_labels (device_id, key, value) SELECT d.id, j.key, j.value FROM devices d, json_each_text(d.labels::json) j;`,

	// PostgreSQL's audit log keeps its identity column: a sequence, not
	// a row of a table that each entry rewrites.
	14: dropSessionIndexes,

	// PostgreSQL's bytes.
	15: fmt.Sprintf(rolloutsSQL, "BYTEA"),
}
