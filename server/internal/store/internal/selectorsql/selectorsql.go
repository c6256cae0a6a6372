// Package selectorsql writes the SQL that reads the devices a label
// selector picks from the store's index of labels (device_labels).
package selectorsql

import (
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/server/internal/access"
)

// Matching is the SQL of the ids of the devices sel picks, at most
// limit of them (0: all): its shape depends on
// how many requirements sel has of each kind, so it is not kept
// prepared. Driven by the index on (key, value) from sel's first
// requirement that is an equality, if any.
func Matching(sel access.Selector, limit int) (string, []any) {
	var equal, not []access.Requirement
	for _, r := range sel {
		if r.Not {
			not = append(not, r)
		} else {
			equal = append(equal, r)
		}
	}
	var q strings.Builder
	var args []any
	id := "d.id"
	if len(equal) == 0 {
		q.WriteString(`SELECT d.id FROM devices d WHERE 1 = 1`)
	} else {
		id = "l0.device_id"
		q.WriteString(`SELECT l0.device_id FROM device_labels l0`)
		for i, r := range equal[1:] {
			fmt.Fprintf(&q, ` JOIN device_labels l%[1]d ON l%[1]d.device_id = l0.device_id AND l%[1]d.key = ? AND l%[1]d.value = ?`, i+1)
			args = append(args, r.Key, r.Value)
		}
		q.WriteString(` WHERE l0.key = ? AND l0.value = ?`)
		args = append(args, equal[0].Key, equal[0].Value)
	}
	for _, r := range not {
		fmt.Fprintf(&q, ` AND NOT EXISTS (SELECT 1 FROM device_labels n WHERE n.device_id = %s AND n.key = ? AND n.value = ?)`, id)
		args = append(args, r.Key, r.Value)
	}
	if limit > 0 {
		q.WriteString(` LIMIT ?`)
		args = append(args, limit)
	}
	return q.String(), args
}
