package plan

import (
	"gopkg.in/yaml.v3"
)

// CheckExpanded refuses a document whose aliases expand it past limit
// bytes. It measures the document as a node tree, in which an alias is a
// pointer to its anchor and costs nothing, what the aliases would cost
// once expanded.
func CheckExpanded(doc *yaml.Node, limit int) error {
	if size := expandedSize(doc, map[*yaml.Node]int{}); size > limit {
		return &ExpandedError{Size: size, Limit: limit}
	}
	return nil
}

// sizeCeiling is where expandedSize stops counting: nested aliases can
// describe more bytes than an int holds.
const sizeCeiling = 1 << 50

// inProgress marks, in expandedSize's memo, a node being measured: an
// alias back to it is a cycle, which decoding refuses.
const inProgress = -1

// expandedSize is a lower bound of the size of n as JSON with every alias
// expanded: a string is its text and two quotes, any other scalar at
// least one byte, and a mapping or sequence its braces, commas, colons and
// contents. A merge key ("<<") counts nothing, since keys written beside
// it may override what it brings. memo holds the nodes already measured,
// so that each anchor is measured once however often it is used.
func expandedSize(n *yaml.Node, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if size, ok := memo[n]; ok {
		return max(size, 0)
	}
	memo[n] = inProgress
	size := 0
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			size = add(size, expandedSize(c, memo))
		}
	case yaml.AliasNode:
		size = expandedSize(n.Alias, memo)
	case yaml.ScalarNode:
		size = scalarSize(n)
	case yaml.SequenceNode:
		size = 2 + max(len(n.Content)-1, 0)
		for _, c := range n.Content {
			size = add(size, expandedSize(c, memo))
		}
	case yaml.MappingNode:
		size = 1 // the braces, less the comma the first pair does not need
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				continue
			}
			size = add(size, add(expandedSize(k, memo)+2, expandedSize(v, memo))) // its comma and colon
		}
		size = max(size, 2)
	}
	memo[n] = size
	return size
}

// scalarSize is a lower bound of a scalar's size as JSON.
func scalarSize(n *yaml.Node) int {
	if n.ShortTag() == "!!str" {
		return len(n.Value) + 2
	}
	return 1
}

// add adds sizes, stopping at sizeCeiling.
func add(a, b int) int {
	return min(a+b, sizeCeiling)
}
