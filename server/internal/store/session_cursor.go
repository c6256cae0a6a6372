package store

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// ErrBadCursor is a listing's cursor that this server did not give.
var ErrBadCursor = errors.New("not a cursor this server gave")

// CursorAfter is the opaque cursor of the page that follows row in a
// listing of sessions.
func CursorAfter(row Session) string {
	b, _ := json.Marshal([]string{row.CreatedAt.UTC().Format(time.RFC3339Nano), row.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ReadCursor reads a cursor CursorAfter made; "" is the first page (nil).
// Anything else is ErrBadCursor.
func ReadCursor(cursor string) (*SessionKey, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	var key []string
	if err != nil || json.Unmarshal(b, &key) != nil || len(key) != 2 {
		return nil, ErrBadCursor
	}
	at, err := time.Parse(time.RFC3339Nano, key[0])
	if err != nil {
		return nil, ErrBadCursor
	}
	return &SessionKey{CreatedAt: at, ID: key[1]}, nil
}
