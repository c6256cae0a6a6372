// Package pgbatch is what the store's PostgreSQL writer needs below
// pgconn to send a batch in one round trip: its statements with numbered
// placeholders, their parameters in PostgreSQL's text format, and a look
// at the connection, before a batch goes out, that tells whether the
// server closed it or spoke unasked.
package pgbatch

import (
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Params are args in PostgreSQL's text format, for the parameters of sd.
func Params(types *pgtype.Map, sd *pgconn.StatementDescription, args []any) ([][]byte, error) {
	if len(args) != len(sd.ParamOIDs) {
		return nil, fmt.Errorf("store: expected %d arguments, got %d", len(sd.ParamOIDs), len(args))
	}
	out := make([][]byte, len(args))
	for i, a := range args {
		v, err := textParam(types, sd.ParamOIDs[i], a)
		if err != nil {
			return nil, fmt.Errorf("store: converting argument $%d (%T): %w", i+1, a, err)
		}
		out[i] = v
	}
	return out, nil
}

// Numbered rewrites the ? placeholders of query as $1, $2, …,
// leaving alone those inside quoted strings and identifiers.
func Numbered(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	var quote byte // the quote we are inside, or 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// ExpectRow is query, an INSERT, UPDATE or DELETE, made to fail unless
// it changes a row: its count divides one (22012, division by zero).
// PostgreSQL's SQL has no statement of its own that raises an error.
func ExpectRow(query string) string {
	return `WITH changed AS (` + query + ` RETURNING 1) SELECT 1 / count(*) FROM changed`
}

// BoolInt is b as the store's flag columns hold it.
func BoolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// empty is the empty text, which nil would make NULL.
var empty = []byte{}

// textParam is a in PostgreSQL's text format for a parameter of type
// oid: strings and integers as they are, which is what the store binds
// on its hot path, and anything else as pgx encodes it. A string's bytes
// are lent, not copied: pgconn only reads them, into its buffer.
func textParam(types *pgtype.Map, oid uint32, a any) ([]byte, error) {
	switch v := a.(type) {
	case nil:
		return nil, nil
	case string:
		if oid != pgtype.ByteaOID {
			if v == "" {
				return empty, nil
			}
			return unsafe.Slice(unsafe.StringData(v), len(v)), nil
		}
	case int64:
		return strconv.AppendInt(nil, v, 10), nil
	case int:
		return strconv.AppendInt(nil, int64(v), 10), nil
	case driver.Valuer:
		dv, err := v.Value()
		if err != nil {
			return nil, err
		}
		if _, again := dv.(driver.Valuer); !again {
			return textParam(types, oid, dv)
		}
	}
	return types.Encode(oid, pgtype.TextFormatCode, a, nil)
}
