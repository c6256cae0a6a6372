// Package refused has one struct for each thing cborgen refuses.
package refused

type Float struct {
	Ratio float64 `cbor:"ratio"`
}

type NoTag struct {
	Name string
}

type SameKey struct {
	A string `cbor:"a"`
	B string `cbor:"a,omitempty"`
}

type Nested struct {
	Inner Fine `cbor:"inner"`
}

type Fine struct {
	Name string `cbor:"name"`
}

type KeyAsInt struct {
	A string `cbor:"1,keyasint"`
}

type StringMap struct {
	Labels map[string]string `cbor:"labels,omitzero"`
}

type DeepRefusal struct {
	Items []Float `cbor:"items"`
}
