package config

import "reflect"

// Merge lays o over c, as Nomad merges its agent's config: each field o
// sets (one that is not its zero value) replaces c's, field by field
// within nested structs; the rest keep c's. Wire, whose zero value CBOR
// is a choice too, is o's if o's file or flags gave it. The servers are
// one setting: o's server URL or URLs, if it gives either, replace both
// of c's, so that the flags' --server replaces the file's server.urls.
func (c Config) Merge(o Config) Config {
	out := c
	mergeFields(reflect.ValueOf(&out).Elem(), reflect.ValueOf(o))
	if o.wireSet {
		out.Wire, out.wireSet = o.Wire, true
	}
	if len(o.Servers()) > 0 {
		out.ServerURL, out.ServerURLs = o.ServerURL, o.ServerURLs
	}
	return out
}

// mergeFields sets each exported field of dst that src sets.
func mergeFields(dst, src reflect.Value) {
	for i := range src.NumField() {
		if !src.Type().Field(i).IsExported() {
			continue
		}
		s, d := src.Field(i), dst.Field(i)
		switch {
		case s.Kind() == reflect.Struct:
			mergeFields(d, s)
		case !s.IsZero():
			d.Set(s)
		}
	}
}
