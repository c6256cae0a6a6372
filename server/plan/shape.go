package plan

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/suggest"
	"gopkg.in/yaml.v3"
)

// parseNode reads the one YAML document in r as a node tree.
func parseNode(r io.Reader) (*yaml.Node, error) {
	dec := yaml.NewDecoder(r)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return &doc, errMore
	}
	return &doc, nil
}

// kind is what a plan's key takes.
type kind int

const (
	text kind = iota
	boolean
	integer
	duration
	params
	stepList
	actionList
)

// The keys of a plan, a step and an action, and what each takes.
var (
	planKeys   = map[string]kind{"task_name": text, "early_exit": boolean, "steps": stepList}
	actionKeys = map[string]kind{"tool": text, "tool_name": text, "tool_type": text, "parameters": params}
	stepKeys   = map[string]kind{"tool": text, "tool_name": text, "tool_type": text, "parameters": params,
		"actions": actionList, "timeout": duration, "retries": integer, "backoff": duration, "early_exit": boolean}
)

// shape checks a plan's node tree against the keys a plan has, before it
// is decoded, so that every problem of that kind is found at once, where
// it is, in the plan's terms: an unknown key (with the one most likely
// meant), a value of the wrong kind. It also notes where each path is,
// for the problems validation finds later.
type shape struct {
	problems []Problem
	at       map[string]*yaml.Node
}

func (s *shape) add(n *yaml.Node, path, format string, args ...any) {
	s.problems = append(s.problems, Problem{Line: n.Line, Column: n.Column, Path: path, Problem: fmt.Sprintf(format, args...)})
}

// locate gives p the line and column of its path, or of the nearest
// path above it that is known.
func (s *shape) locate(p Problem) Problem {
	for path := p.Path; path != ""; path = parent(path) {
		if n, ok := s.at[path]; ok {
			p.Line, p.Column = n.Line, n.Column
			return p
		}
	}
	return p
}

// parent is the path above path: steps[1] for steps[1].timeout, steps
// for steps[1].
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

func resolved(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mapping checks a plan, a step or an action: a mapping of known keys.
func (s *shape) mapping(n *yaml.Node, path string, keys map[string]kind, what string) {
	n = resolved(n)
	if n.Kind != yaml.MappingNode {
		s.add(n, path, "want %s, got %s", what, describe(n))
		return
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Value == "<<" && key.Tag == "!!merge" {
			s.merge(val, path, keys, what)
			continue
		}
		at := join(path, key.Value)
		k, known := keys[key.Value]
		switch {
		case !known:
			s.add(key, at, "unknown key%s", suggest.DidYouMean(key.Value, names))
			continue
		case seen[key.Value]:
			s.add(key, at, "given twice")
			continue
		}
		seen[key.Value] = true
		s.at[at] = key
		s.value(val, at, k)
	}
}

// merge checks what a YAML merge key ("<<: *defaults") brings in.
func (s *shape) merge(n *yaml.Node, path string, keys map[string]kind, what string) {
	if n = resolved(n); n.Kind == yaml.SequenceNode {
		for _, c := range n.Content {
			s.mapping(c, path, keys, what)
		}
		return
	}
	s.mapping(n, path, keys, what)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// value checks a value of kind k at path.
func (s *shape) value(n *yaml.Node, path string, k kind) {
	n = resolved(n)
	switch k {
	case stepList, actionList:
		if n.Kind != yaml.SequenceNode {
			s.add(n, path, "want a list of %s, got %s", map[kind]string{stepList: "steps", actionList: "actions"}[k], describe(n))
			return
		}
		for i, c := range n.Content {
			at := fmt.Sprintf("%s[%d]", path, i)
			s.at[at] = resolved(c)
			if k == stepList {
				s.mapping(c, at, stepKeys, "a step: a mapping with tool and parameters, or actions")
			} else {
				s.mapping(c, at, actionKeys, "an action: a mapping with tool and parameters")
			}
		}
	case params:
		if n.Kind != yaml.MappingNode && n.ShortTag() != "!!null" {
			s.add(n, path, "want a mapping of parameter names to values, got %s", describe(n))
		}
	case text:
		if n.Kind != yaml.ScalarNode {
			s.add(n, path, "want text, got %s", describe(n))
		}
	case boolean:
		if n.ShortTag() != "!!bool" {
			s.add(n, path, "want true or false, got %s", describe(n))
		}
	case integer:
		if n.ShortTag() != "!!int" {
			s.add(n, path, "want a whole number, got %s", describe(n))
		}
	case duration:
		if _, err := time.ParseDuration(n.Value); n.ShortTag() != "!!str" || err != nil {
			s.add(n, path, `want a duration such as "20s" or "1m30s", got %s`, describe(n))
		}
	}
}

// describe names a value as the plan's author wrote it.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.ShortTag() == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}
