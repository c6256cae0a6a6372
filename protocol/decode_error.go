package protocol

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fxamacker/cbor/v2"
)

// describeCBORError rewords the CBOR decoder's errors in the terms of the
// message model, the same for both encodings: the field at fault, and what
// it wanted and got in JSON's type names.
func describeCBORError(err error) error {
	var (
		typeErr *cbor.UnmarshalTypeError
		dupErr  *cbor.DupMapKeyError
		depth   *cbor.MaxNestedLevelError
		arrays  *cbor.MaxArrayElementsError
		maps    *cbor.MaxMapPairsError
		sem     *cbor.SemanticError
		unacc   *cbor.UnacceptableDataItemError
		extra   *cbor.ExtraneousDataError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr):
		return describeTypeError(typeErr)
	case errors.As(err, &dupErr):
		return fmt.Errorf("duplicate key %s", quoteKey(dupErr.Key))
	case errors.As(err, &depth):
		return fmt.Errorf("nesting deeper than %d levels", MaxDepth)
	case errors.As(err, &arrays):
		return fmt.Errorf("array longer than %d elements", MaxArrayElements)
	case errors.As(err, &maps):
		return fmt.Errorf("map with more than %d pairs", MaxMapPairs)
	case errors.As(err, &extra):
		return errors.New("data after the CBOR value")
	case errors.As(err, &unacc):
		return fmt.Errorf("%s is not allowed", unacc.Message)
	case errors.As(err, &sem) && strings.Contains(err.Error(), "UTF-8"):
		return errors.New("invalid UTF-8")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "cbor: "))
}

func describeTypeError(e *cbor.UnmarshalTypeError) error {
	got := wireTypeName(e.CBORType)
	if e.StructFieldName == "" {
		return fmt.Errorf("want %s, got %s", goTypeName(e.GoType), got)
	}
	// StructFieldName is "protocol.Command.tool_name": the struct, then
	// the key on the wire. The decoder names the outermost field, so the
	// value at fault may be in it or anywhere inside it.
	field := e.StructFieldName[strings.LastIndex(e.StructFieldName, ".")+1:]
	if strings.Contains(e.Error(), "overflows") {
		return fmt.Errorf("in field %q: integer out of range", field)
	}
	return fmt.Errorf("in field %q: want %s, got %s", field, goTypeName(e.GoType), got)
}

func quoteKey(k any) string {
	if s, ok := k.(string); ok {
		return fmt.Sprintf("%q", clip(s))
	}
	return clip(fmt.Sprint(k))
}

// wireTypeName names a CBOR major type as JSON would.
func wireTypeName(cborType string) string {
	switch cborType {
	case "positive integer":
		return "an integer"
	case "negative integer":
		return "a negative integer"
	case "UTF-8 text string":
		return "a string"
	case "map":
		return "an object"
	case "array":
		return "an array"
	case "primitives":
		return "a boolean, null or float"
	}
	return "a " + cborType
}

// goTypeName names a Go type of the model as JSON would.
func goTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "*protocol."),
		strings.HasPrefix(goType, "protocol.") && !isEnumType(goType):
		return "an object"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string" || isEnumType(goType):
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "uint"):
		return "a non-negative integer"
	case strings.HasPrefix(goType, "int"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return goType
}

func isEnumType(goType string) bool {
	switch strings.TrimPrefix(goType, "protocol.") {
	case "ResultStatus", "TaskStatus", "ClientMessageType", "ServerMessageType", "ClientType", "ToolType":
		return true
	}
	return false
}
