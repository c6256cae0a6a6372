package protocol

// Kinds has a field of every type and omit rule cborgen accepts.
// TestEveryKind copies it into a scratch copy of protocol, generates the
// fast path for it there, and runs kinds_test.go against cborEnc and the
// strict decoder.
type Kinds struct {
	Text    string           `cbor:"text"`
	OptText string           `cbor:"opt_text,omitempty"`
	Label   Label            `cbor:"label,omitzero"`
	Color   Color            `cbor:"color"`
	Colors  []Color          `cbor:"colors,omitempty"`
	U32     uint32           `cbor:"u32,omitempty"`
	U64     uint64           `cbor:"u64"`
	I64     int64            `cbor:"i64,omitzero"`
	Any     any              `cbor:"any"`
	OptAny  any              `cbor:"opt_any,omitempty"`
	Map     map[string]any   `cbor:"map"`
	OptMap  map[string]any   `cbor:"opt_map,omitempty"`
	Strings []string         `cbor:"strings"`
	Maps    []map[string]any `cbor:"maps,omitzero"`
	Nested  [][]int64        `cbor:"nested,omitempty"`
	Items   []Item           `cbor:"items"`
	Ptr     *Item            `cbor:"ptr"`
	OptPtr  *Item            `cbor:"opt_ptr,omitempty"`
	Ptrs    []*Item          `cbor:"ptrs,omitzero"`
	Long    string           `cbor:"a_key_of_more_than_23_bytes,omitempty"`
}

// Item is a struct inside Kinds, and inside itself.
type Item struct {
	Name string   `cbor:"name"`
	Self *Item    `cbor:"self,omitempty"`
	Both []string `cbor:"both,omitempty,omitzero"`
}

// Color is an enum: colors lists its values.
type Color string

var colors = [...]Color{"red", "green"}

// Label is a named string type without a list of values.
type Label string

// Validate makes Kinds a Message, as the fast path's roots are.
func (*Kinds) Validate() error { return nil }
