package access

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Selector picks devices by their labels: every requirement must hold.
// An empty Selector picks every device.
type Selector []Requirement

// Requirement is one condition on a label: key=value, or, with Not,
// key!=value (which a device without the label meets).
type Requirement struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Not   bool   `json:"not,omitempty"`
}

// selectorWord is what keys and values may be: what a label needs to be
// written on a command line and in a URL without quoting.
var selectorWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)

// ParseSelector reads "k=v,k2!=v2" ("==" is "="). Spaces around each
// requirement are ignored; "" is the empty Selector.
func ParseSelector(text string) (Selector, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	var s Selector
	for part := range strings.SplitSeq(text, ",") {
		r, err := parseRequirement(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		s = append(s, r)
	}
	return s.normal(), nil
}

func parseRequirement(text string) (Requirement, error) {
	var r Requirement
	key, value, found := strings.Cut(text, "!=")
	if found {
		r.Not = true
	} else if key, value, found = strings.Cut(text, "=="); !found {
		key, value, found = strings.Cut(text, "=")
	}
	r.Key, r.Value = strings.TrimSpace(key), strings.TrimSpace(value)
	switch {
	case !found:
		return r, fmt.Errorf("%q: want KEY=VALUE or KEY!=VALUE", text)
	case !selectorWord.MatchString(r.Key):
		return r, fmt.Errorf("%q: label key %q: want 1-63 of [A-Za-z0-9._/-], starting with a letter or digit", text, r.Key)
	case !selectorWord.MatchString(r.Value):
		return r, fmt.Errorf("%q: label value %q: want 1-63 of [A-Za-z0-9._/-], starting with a letter or digit", text, r.Value)
	}
	return r, nil
}

// LabelSelector is the Selector that labels, as a fleet asks for them,
// make: each key equal to its value.
func LabelSelector(labels map[string]string) Selector {
	s := make(Selector, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		s = append(s, Requirement{Key: k, Value: labels[k]})
	}
	return s
}

// Matches reports whether labels meet every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.Key]
		if (ok && v == r.Value) == r.Not {
			return false
		}
	}
	return true
}

// And is the Selector that both s and o's requirements make.
func (s Selector) And(o Selector) Selector {
	return append(slices.Clone(s), o...).normal()
}

// Implies reports whether every device s picks is one o picks, as far as
// their text tells: each of o's requirements is one of s's. It may say
// false for a selector that implies o in a roundabout way; never true for
// one that does not.
func (s Selector) Implies(o Selector) bool {
	for _, r := range o {
		if !slices.Contains(s, r) {
			return false
		}
	}
	return true
}

// String writes s as ParseSelector reads it, sorted.
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		op := "="
		if r.Not {
			op = "!="
		}
		parts[i] = r.Key + op + r.Value
	}
	return strings.Join(parts, ",")
}

// normal sorts s and drops repeats, so that equal selectors are equal.
func (s Selector) normal() Selector {
	slices.SortFunc(s, func(a, b Requirement) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value), boolCompare(a.Not, b.Not))
	})
	return slices.Compact(s)
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
