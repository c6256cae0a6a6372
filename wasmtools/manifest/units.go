package manifest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in JSON as a string, e.g. "1.5s".
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("duration %q: want a non-negative duration such as \"5s\"", s)
	}
	*d = Duration(v)
	return nil
}

// ByteSize is a size in bytes, written in JSON as a number of bytes or as
// a string with a binary unit: "512KiB", "32MiB", "1GiB".
type ByteSize uint64

var units = []struct {
	suffix string
	mult   uint64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// MarshalJSON implements json.Marshaler: the largest unit that divides the
// size exactly.
func (s ByteSize) MarshalJSON() ([]byte, error) {
	for _, u := range units {
		if uint64(s)%u.mult == 0 && uint64(s) >= u.mult {
			return json.Marshal(fmt.Sprintf("%d%s", uint64(s)/u.mult, u.suffix))
		}
	}
	return json.Marshal(uint64(s))
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *ByteSize) UnmarshalJSON(b []byte) error {
	var n uint64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = ByteSize(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("size: want bytes or a string such as \"32MiB\", got %s", b)
	}
	v, err := ParseByteSize(str)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseByteSize reads "32MiB", "512KiB", "1GiB", "100B" or a plain number
// of bytes.
func ParseByteSize(str string) (ByteSize, error) {
	for _, u := range units {
		num, ok := strings.CutSuffix(str, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(num), 10, 64)
		if err != nil || n > ^uint64(0)/u.mult {
			break
		}
		return ByteSize(n * u.mult), nil
	}
	if n, err := strconv.ParseUint(str, 10, 64); err == nil {
		return ByteSize(n), nil
	}
	return 0, fmt.Errorf("size %q: want bytes or a number with KiB, MiB or GiB, such as \"32MiB\"", str)
}
