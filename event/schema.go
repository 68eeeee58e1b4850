package event

import (
	"encoding/json"
	"strings"
	"sync"

	querypb "vitess.io/vitess/go/vt/proto/query"
)

// Kind is what a column's values mean, as far as an encoding of change
// events needs to know. The default format writes each kind as event/TYPES.md
// says; other formats (the Debezium envelope, event/debezium) re-encode an
// event's values from its bytes and its columns' kinds, so the row is read
// from vtgate and decoded once whatever formats its readers ask for.
type Kind uint8

// Column kinds. The JSON in comments is how the default format writes them.
const (
	KindUnknown   Kind = iota // written as text or base64: passed through
	KindInt16                 // TINYINT, SMALLINT, TINYINT UNSIGNED: number
	KindInt32                 // MEDIUMINT, INT, SMALLINT/MEDIUMINT UNSIGNED: number
	KindInt64                 // BIGINT, INT UNSIGNED: number
	KindUint64                // BIGINT UNSIGNED: number (may exceed int64)
	KindYear                  // YEAR: number
	KindFloat                 // FLOAT, DOUBLE: number
	KindDecimal               // DECIMAL: string
	KindBit                   // BIT(Length): number
	KindDate                  // DATE: "YYYY-MM-DD"
	KindDateTime              // DATETIME(Decimals): "YYYY-MM-DDThh:mm:ss[.f]"
	KindTimestamp             // TIMESTAMP(Decimals): "YYYY-MM-DDThh:mm:ss[.f]Z"
	KindTime                  // TIME(Decimals): "[-]h:mm:ss[.f]"
	KindText                  // character strings, UUID, INET4, INET6: string
	KindBytes                 // binary strings, BLOB: base64 string
	KindGeometry              // spatial types: base64 string
	KindEnum                  // ENUM: string
	KindSet                   // SET: array of strings
	KindJSON                  // JSON: embedded document
	KindNull                  // a column vtgate types as NULL: null
)

// Column is one column of a table version.
type Column struct {
	Name string `json:"n"`
	Kind Kind   `json:"k"`
	// Optional: the column may be NULL.
	Optional bool `json:"o,omitempty"`
	// PK: the column is part of the primary key.
	PK bool `json:"p,omitempty"`
	// Length is a BIT column's number of bits.
	Length uint32 `json:"l,omitempty"`
	// Decimals is the fractional-seconds precision of a DATETIME,
	// TIMESTAMP or TIME column.
	Decimals uint32 `json:"d,omitempty"`
	// Values are an ENUM's or a SET's members, in definition order.
	Values []string `json:"v,omitempty"`
}

// Schema is a table version's columns, shared by every event encoded from
// it (Event.Schema): what another format needs to re-encode the event's
// values. A Schema is immutable.
type Schema struct {
	Keyspace string   `json:"ks"`
	Table    string   `json:"t"`
	Columns  []Column `json:"c"`

	// derived caches what other formats build once per table version
	// (a Debezium schema document, say), keyed by their own keys.
	derived sync.Map
}

// Derived returns what build builds for key, built once per Schema and
// key. build must be deterministic: under a race it may run twice.
func (s *Schema) Derived(key string, build func() any) any {
	if v, ok := s.derived.Load(key); ok {
		return v
	}
	v, _ := s.derived.LoadOrStore(key, build())
	return v
}

// MarshalSchema is the JSON a spool keeps of s; UnmarshalSchema reads it
// back.
func MarshalSchema(s *Schema) ([]byte, error) { return json.Marshal(s) }

// UnmarshalSchema is the Schema MarshalSchema wrote into b.
func UnmarshalSchema(b []byte) (*Schema, error) {
	s := new(Schema)
	if err := json.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// columnOf describes one Field.
func columnOf(f *querypb.Field, isJSON bool) Column {
	c := Column{
		Name:     f.Name,
		Kind:     kindOf(f, isJSON),
		Optional: f.Flags&uint32(querypb.MySqlFlag_NOT_NULL_FLAG) == 0,
		PK:       f.Flags&uint32(querypb.MySqlFlag_PRI_KEY_FLAG) != 0,
	}
	switch c.Kind {
	case KindBit:
		c.Length = f.ColumnLength
	case KindDateTime, KindTimestamp, KindTime:
		c.Decimals = f.Decimals
	case KindEnum, KindSet:
		c.Values = enumValues(f.ColumnType)
	}
	return c
}

// kindOf classifies a Field the way compileField picks its encoder.
func kindOf(f *querypb.Field, isJSON bool) Kind {
	switch f.Type {
	case querypb.Type_NULL_TYPE:
		return KindNull
	case querypb.Type_INT8, querypb.Type_UINT8, querypb.Type_INT16:
		return KindInt16
	case querypb.Type_UINT16, querypb.Type_INT24, querypb.Type_UINT24, querypb.Type_INT32:
		return KindInt32
	case querypb.Type_UINT32, querypb.Type_INT64:
		return KindInt64
	case querypb.Type_UINT64:
		return KindUint64
	case querypb.Type_YEAR:
		return KindYear
	case querypb.Type_FLOAT32, querypb.Type_FLOAT64:
		return KindFloat
	case querypb.Type_DECIMAL:
		return KindDecimal
	case querypb.Type_BIT:
		return KindBit
	case querypb.Type_DATE:
		return KindDate
	case querypb.Type_DATETIME:
		return KindDateTime
	case querypb.Type_TIMESTAMP:
		return KindTimestamp
	case querypb.Type_TIME:
		return KindTime
	case querypb.Type_ENUM:
		return KindEnum
	case querypb.Type_SET:
		return KindSet
	case querypb.Type_JSON:
		return KindJSON
	case querypb.Type_GEOMETRY:
		return KindGeometry
	case querypb.Type_BINARY:
		if mariadbBinaryType(f) != nil {
			return KindText
		}
	}
	codec := textCodecOf(f)
	if isJSON && (codec == nil || codec == utf8Codec) {
		return KindJSON
	}
	if codec == nil {
		return KindBytes
	}
	return KindText
}

// enumValues reads the members of an ENUM or SET column type such as
// enum('a','b”c') — quotes doubled inside a member, as MySQL writes them.
// An unknown column type gives none.
func enumValues(columnType string) []string {
	open := strings.IndexByte(columnType, '(')
	if open < 0 {
		return nil
	}
	var out []string
	var cur strings.Builder
	in := false
	s := columnType[open+1:]
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case !in && ch == '\'':
			in = true
		case in && ch == '\'' && i+1 < len(s) && s[i+1] == '\'':
			cur.WriteByte('\'')
			i++
		case in && ch == '\'':
			in = false
			out = append(out, cur.String())
			cur.Reset()
		case in:
			cur.WriteByte(ch)
		}
	}
	return out
}
