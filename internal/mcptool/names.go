package mcptool

import "strings"

// MaxNameLen is the longest tool name many MCP clients take: names must
// match ^[A-Za-z0-9_-]{1,64}$.
const MaxNameLen = 64

// Named is a tool to be named: Base is what its name is made from
// ("kiosk-1__hash_file"), Key what tells it from every other tool (its
// device, namespace, tool type and name), whatever Base says.
type Named struct {
	Base string
	Key  string
}

// Names gives each tool a name that matches ^[A-Za-z0-9_-]{1,64}$ and no
// other tool of the list has:
//
//   - every character of Base outside [A-Za-z0-9_-] becomes "_" (so a "."
//     does);
//   - a name longer than 64 characters, and every name that two or more
//     tools would share, is cut to 55 characters and suffixed with "_"
//     and the first 8 hex digits of the SHA-256 of the tool's Key.
//
// A name that collides is never given to one of the tools that share it:
// a model that learned "x" must not find it pointing at another tool once
// a second "x" appears. Names[i] is the name of tools[i].
func Names(tools []Named) []string {
	names := make([]string, len(tools))
	count := map[string]int{}
	for i, t := range tools {
		names[i] = sanitize(t.Base)
		count[names[i]]++
	}
	for i, t := range tools {
		if n := names[i]; len(n) > MaxNameLen || count[n] > 1 {
			names[i] = hashed(n, t.Key)
		}
	}
	return names
}

// hashed is name cut to leave room for "_" and the short hash of key.
func hashed(name, key string) string {
	const keep = MaxNameLen - 1 - 8
	if len(name) > keep {
		name = name[:keep]
	}
	return name + "_" + shortHash(key)
}

// sanitize replaces each character outside [A-Za-z0-9_-] with "_"; an
// empty base is "_", so that every name has a character.
func sanitize(base string) string {
	if base == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
