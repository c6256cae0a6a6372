package config

import (
	"reflect"
	"slices"
	"strings"

	"github.com/edgeaip/edgeaip/internal/suggest"
)

// unknownFieldHint is "; did you mean X?" for the unknown key that ends
// path in the config file, as plans and manifests say it: the field of the
// same section it is a likely typo of (server.token_fle: server.token_file),
// or else the fields of the sections under it that have its very name (id
// at the top: device.id). It is "" when there is no likely one.
func unknownFieldHint(path []any) string {
	if len(path) == 0 {
		return ""
	}
	parent, key := path[:len(path)-1], path[len(path)-1]
	name, ok := key.(string)
	if !ok {
		return ""
	}
	t, ok := typeAt(reflect.TypeFor[fileConfig](), parent)
	if !ok || t.Kind() != reflect.Struct {
		return ""
	}
	if n := suggest.Nearest(name, fieldNames(t)); n != "" {
		return "; did you mean " + dotted(append(slices.Clone(parent), n)) + "?"
	}
	var under []string
	for i := range t.NumField() {
		f := t.Field(i)
		if ft := deref(f.Type); ft.Kind() == reflect.Struct && slices.Contains(fieldNames(ft), name) {
			under = append(under, dotted(append(slices.Clone(parent), fieldName(f), name)))
		}
	}
	if len(under) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(under, " or ") + "?"
}

// typeAt is the Go type of the file's value at path, from t: a struct's
// field by its YAML name, a map's value whatever its key, a list's item.
func typeAt(t reflect.Type, path []any) (reflect.Type, bool) {
	for _, p := range path {
		t = deref(t)
		switch {
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Slice:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := fieldNamed(t, p)
			if !ok {
				return nil, false
			}
			t = f.Type
		default:
			return nil, false
		}
	}
	return deref(t), true
}

// fieldNamed is the field of struct t whose YAML name is name.
func fieldNamed(t reflect.Type, name any) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); fieldName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// fieldNames are the YAML names of struct t's fields.
func fieldNames(t reflect.Type) []string {
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = fieldName(t.Field(i))
	}
	return names
}

// fieldName is f's name in the file, its yaml tag.
func fieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
