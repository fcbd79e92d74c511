package schemas

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Kind is the JSON kind of a value, as a payload's readers see it.
type Kind string

// JSON kinds. Integer is a number without a fraction (a Go integer);
// Any is a value of any kind (an interface, a json.RawMessage, a type
// with its own MarshalJSON).
const (
	KindString  Kind = "string"
	KindInteger Kind = "integer"
	KindNumber  Kind = "number"
	KindBoolean Kind = "boolean"
	KindObject  Kind = "object"
	KindArray   Kind = "array"
	KindAny     Kind = "any"
)

// accepts reports whether a reader expecting kind k reads a value
// written as kind old: the same kind, an integer as a number, anything
// as Any.
func (k Kind) accepts(old Kind) bool {
	return k == old || k == KindAny || k == KindNumber && old == KindInteger
}

// Shape is the JSON shape of a value: its kind and, for an object with
// named fields (a struct), its fields in name order; for an object keyed
// by strings (a map), its values' shape; for an array, its items'.
type Shape struct {
	Kind   Kind    `json:"kind"`
	Fields []Field `json:"fields,omitempty"`
	Values *Shape  `json:"values,omitempty"`
	Items  *Shape  `json:"items,omitempty"`
}

// Field is one named field of an object: its JSON name and its shape.
type Field struct {
	Name string `json:"name"`
	Shape
}

// field returns the field of s called name.
func (s Shape) field(name string) (Field, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// ShapeOf returns the JSON shape encoding/json gives values of t: field
// names from the json tags (a field tagged "-" and unexported fields
// left out, embedded structs' fields promoted, ",string" fields strings),
// pointers as what they point to, []byte as a string, time.Time and
// encoding.TextMarshalers as strings, other json.Marshalers and
// interfaces as Any. A type that contains itself is Any where it recurs.
func ShapeOf(t reflect.Type) Shape {
	return shapeOf(t, map[reflect.Type]bool{})
}

func shapeOf(t reflect.Type, seen map[reflect.Type]bool) Shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return Shape{Kind: KindString}
	case implements(t, jsonMarshalerType):
		return Shape{Kind: KindAny}
	case implements(t, textMarshalerType):
		return Shape{Kind: KindString}
	}
	switch t.Kind() {
	case reflect.Bool:
		return Shape{Kind: KindBoolean}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Shape{Kind: KindInteger}
	case reflect.Float32, reflect.Float64:
		return Shape{Kind: KindNumber}
	case reflect.String:
		return Shape{Kind: KindString}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return Shape{Kind: KindString} // base64
		}
		items := shapeOf(t.Elem(), seen)
		return Shape{Kind: KindArray, Items: &items}
	case reflect.Map:
		values := shapeOf(t.Elem(), seen)
		return Shape{Kind: KindObject, Values: &values}
	case reflect.Struct:
		if seen[t] {
			return Shape{Kind: KindAny}
		}
		seen[t] = true
		defer delete(seen, t)
		return Shape{Kind: KindObject, Fields: fieldsOf(t, seen)}
	}
	return Shape{Kind: KindAny} // interfaces, and kinds JSON cannot hold
}

// implements reports whether t or *t implements iface.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// fieldsOf returns the JSON fields of struct t, sorted by name; a field
// promoted from an embedded struct loses to one of the same name nearer
// the top, as in encoding/json.
func fieldsOf(t reflect.Type, seen map[reflect.Type]bool) []Field {
	byName := map[string]Field{}
	depth := map[string]int{}
	var walk func(t reflect.Type, d int)
	walk = func(t reflect.Type, d int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := sf.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, d+1) // promoted fields, exported or not
				continue
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if prev, ok := depth[name]; ok && prev <= d {
				continue
			}
			s := shapeOf(sf.Type, seen)
			if hasOpt(opts, "string") && (s.Kind == KindInteger || s.Kind == KindNumber || s.Kind == KindBoolean || s.Kind == KindString) {
				s = Shape{Kind: KindString}
			}
			byName[name], depth[name] = Field{Name: name, Shape: s}, d
		}
	}
	walk(t, 0)
	out := make([]Field, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func hasOpt(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}
