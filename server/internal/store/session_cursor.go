package store

import "github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"

// ErrBadCursor is a listing's cursor that this server did not give.
var ErrBadCursor = sqlrow.ErrBadCursor

// CursorAfter is the cursor of the page that follows row in a listing of
// sessions.
func CursorAfter(row Session) string { return sqlrow.Cursor(row.CreatedAt, row.ID) }

// ReadCursor reads a cursor CursorAfter made; "" is the first page (nil).
func ReadCursor(cursor string) (*SessionKey, error) {
	if cursor == "" {
		return nil, nil
	}
	at, id, err := sqlrow.ReadCursor(cursor)
	if err != nil {
		return nil, err
	}
	return &SessionKey{CreatedAt: at, ID: id}, nil
}
