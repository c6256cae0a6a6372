package store

import (
	"database/sql"
	"database/sql/driver"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/driverstmt"
)

// namedValues converts a statement's arguments into the driver's values
// (driverstmt.NamedValues), in the dialect's types, into the writer's
// buffer, reused by the next statement.
func (s *Store) namedValues(c driverstmt.Conn, st *driverstmt.Stmt, args []any) ([]driver.NamedValue, error) {
	nv, err := driverstmt.NamedValues(s.args, c, st, s.dialect.args(args))
	if err != nil {
		return nil, err
	}
	s.args = nv
	return nv, nil
}

// firstRow is the first row of a query of the writer's.
type firstRow struct{ rows *driverstmt.Rows }

// Scan scans the first row into dest as (*sql.Row).Scan does: no row is
// sql.ErrNoRows. Errors that are the database's say so.
func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return unavailable(err)
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return unavailable(err)
	}
	return unavailable(r.rows.Close())
}
