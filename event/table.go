package event

import (
	"strings"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"
)

// Options tune how a table's rows are encoded.
type Options struct {
	// IsJSON reports whether a column holds JSON documents, to be embedded
	// in events as JSON rather than as strings. MariaDB's JSON type is
	// LONGTEXT with a json_valid() CHECK and arrives in a VStream as a plain
	// BLOB/TEXT column, so only the caller can know (from
	// information_schema.CHECK_CONSTRAINTS, or configuration). Columns of
	// MySQL's native JSON type are always embedded and do not need it.
	//
	// It is called once per column by NewTable, never per row, with the
	// bare table name. It applies to UTF-8 text and binary columns; a value
	// that is not valid JSON is encoded as the column would be otherwise.
	// nil means no column is JSON.
	IsJSON func(table, column string) bool
}

// Table encodes the rows of one table version: it is compiled from the
// table's FIELD event, and a new one must be built when a new FIELD event
// arrives (after a schema change). A Table is immutable and safe for
// concurrent use.
type Table struct {
	keyspace string
	shard    string
	name     string
	cols     []column
	// lastPK is the index of the last primary-key column, -1 if none.
	lastPK int
	// prefix[op] is the event up to and including `"key":`.
	prefix [numOps][]byte
	// schema describes the columns for other formats (Event.Schema).
	schema *Schema
}

// column is one compiled Field.
type column struct {
	name string
	// member is `"name":`, preceded by a comma for every column but the first.
	member []byte
	pk     bool
	enc    encodeFunc
}

// encodeFunc appends one non-NULL value. copyPhase is true for rows of the
// copy phase, whose values of some types are spelled differently.
type encodeFunc func(dst, v []byte, copyPhase bool) ([]byte, error)

const numOps = 4

func opIndex(op Op) int {
	switch op {
	case OpInsert:
		return 0
	case OpUpdate:
		return 1
	case OpDelete:
		return 2
	case OpSnapshot:
		return 3
	}
	return -1
}

var allOps = [numOps]Op{OpInsert, OpUpdate, OpDelete, OpSnapshot}

// NewTable compiles the encoder for the table described by fe. keyspace and
// shard name where the rows come from; when empty, fe's own Keyspace and
// Shard are used. A table name of the form "keyspace.table" is reduced to
// the bare table name.
func NewTable(keyspace, shard string, fe *binlogdatapb.FieldEvent, opts Options) (*Table, error) {
	if fe == nil {
		return nil, &FieldEventError{Keyspace: keyspace, Reason: "nil FIELD event"}
	}
	if keyspace == "" {
		keyspace = fe.Keyspace
	}
	if shard == "" {
		shard = fe.Shard
	}
	name := bareTableName(fe.TableName, keyspace, fe.Keyspace)
	if name == "" {
		return nil, &FieldEventError{Keyspace: keyspace, Table: fe.TableName, Reason: "no table name"}
	}
	t := &Table{keyspace: keyspace, shard: shard, name: name, lastPK: -1}
	t.schema = &Schema{Keyspace: keyspace, Table: name, Columns: make([]Column, 0, len(fe.Fields))}
	seen := make(map[string]bool, len(fe.Fields))
	for i, f := range fe.Fields {
		if f == nil {
			return nil, &FieldEventError{Keyspace: keyspace, Table: name, Reason: "nil field"}
		}
		if f.Name == "" || seen[f.Name] {
			return nil, &FieldEventError{Keyspace: keyspace, Table: name,
				Reason: "empty or duplicate column name " + quoteForError(f.Name)}
		}
		seen[f.Name] = true
		c := column{name: f.Name, pk: f.Flags&uint32(querypb.MySqlFlag_PRI_KEY_FLAG) != 0}
		if i > 0 {
			c.member = append(c.member, ',')
		}
		c.member = append(c.member, quoteName(f.Name)...)
		c.member = append(c.member, ':')
		isJSON := opts.IsJSON != nil && opts.IsJSON(name, f.Name)
		c.enc = compileField(f, isJSON)
		t.schema.Columns = append(t.schema.Columns, columnOf(f, isJSON))
		if c.pk {
			t.lastPK = i
		}
		t.cols = append(t.cols, c)
	}
	for i, op := range allOps {
		p := []byte(`{"type":"change","op":"`)
		p = append(p, op...)
		p = append(p, `","keyspace":`...)
		p = append(p, quoteName(keyspace)...)
		p = append(p, `,"shard":`...)
		p = append(p, quoteName(shard)...)
		p = append(p, `,"table":`...)
		p = append(p, quoteName(name)...)
		p = append(p, `,"key":`...)
		t.prefix[i] = p
	}
	return t, nil
}

func quoteForError(s string) string { return string(quoteName(s)) }

// bareTableName strips a "keyspace." prefix. The gateway asks vtgate for
// bare names (ExcludeKeyspaceFromTableName), but a qualified name must not
// leak into events if that flag is ever lost.
func bareTableName(name string, keyspaces ...string) string {
	for _, ks := range keyspaces {
		if ks != "" && strings.HasPrefix(name, ks+".") {
			return name[len(ks)+1:]
		}
	}
	return name
}

// Keyspace returns the keyspace the table's events carry.
func (t *Table) Keyspace() string { return t.keyspace }

// Shard returns the shard the table's events carry.
func (t *Table) Shard() string { return t.shard }

// Name returns the bare table name the table's events carry.
func (t *Table) Name() string { return t.name }

// Schema returns the table's columns as other formats need them.
func (t *Table) Schema() *Schema { return t.schema }

// Columns returns the column names in row order.
func (t *Table) Columns() []string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	return names
}

// compileField picks the encoder of one column from its Field.
func compileField(f *querypb.Field, isJSON bool) encodeFunc {
	switch f.Type {
	case querypb.Type_NULL_TYPE:
		return alwaysNull
	case querypb.Type_INT8, querypb.Type_UINT8, querypb.Type_INT16, querypb.Type_UINT16,
		querypb.Type_INT24, querypb.Type_UINT24, querypb.Type_INT32, querypb.Type_UINT32,
		querypb.Type_INT64, querypb.Type_UINT64, querypb.Type_YEAR:
		return phaseless(appendInt)
	case querypb.Type_FLOAT32:
		return phaseless(floatEncoder(32, f.Decimals))
	case querypb.Type_FLOAT64:
		return phaseless(floatEncoder(64, f.Decimals))
	case querypb.Type_DECIMAL:
		return phaseless(appendDecimal)
	case querypb.Type_BIT:
		return phaseless(appendBit)
	case querypb.Type_DATE:
		return phaseless(appendDate)
	case querypb.Type_DATETIME:
		return phaseless(appendDatetime)
	case querypb.Type_TIMESTAMP:
		return phaseless(appendTimestamp)
	case querypb.Type_TIME:
		return phaseless(appendTime)
	case querypb.Type_ENUM:
		return textEncoder(textCodecOf(f))
	case querypb.Type_SET:
		return setEncoder(textCodecOf(f))
	case querypb.Type_JSON:
		return jsonEncoder(phaseless(stringEncoder(utf8Codec)))
	case querypb.Type_GEOMETRY:
		return phaseless(appendBase64)
	case querypb.Type_BINARY:
		if enc := mariadbBinaryType(f); enc != nil {
			return enc
		}
	}
	// Character and binary strings, and any type not listed above: text
	// or bytes by character set, not by type, because _bin collations turn
	// VARCHAR/CHAR/TEXT into VARBINARY/BINARY/BLOB.
	codec := textCodecOf(f)
	enc := textEncoder(codec)
	if codec == nil {
		enc = phaseless(appendBase64)
	}
	if isJSON && (codec == nil || codec == utf8Codec) {
		return jsonEncoder(enc)
	}
	return enc
}

// textCodecOf returns the codec of a column, nil if it holds bytes.
func textCodecOf(f *querypb.Field) *textCodec {
	if f.Charset == 0 {
		// No character set reported: trust the type.
		switch f.Type {
		case querypb.Type_BINARY, querypb.Type_VARBINARY, querypb.Type_BLOB,
			querypb.Type_GEOMETRY, querypb.Type_VECTOR, querypb.Type_BIT:
			return nil
		}
		return utf8Codec
	}
	return codecForCollation(f.Charset)
}

// mariadbBinaryType returns the encoder of MariaDB's UUID/INET6/INET4
// columns, which arrive as BINARY, or nil for a genuine BINARY(N).
func mariadbBinaryType(f *querypb.Field) encodeFunc {
	ct := strings.ToLower(strings.TrimSpace(f.ColumnType))
	if ct == "" && f.Flags&uint32(querypb.MySqlFlag_UNSIGNED_FLAG) != 0 && f.Charset == binaryCollation {
		// column_type is filled in by vttablet from the schema; without it,
		// these types are still recognizable: BINARY never has UNSIGNED,
		// and their column lengths are their display widths ×4.
		switch f.ColumnLength {
		case 144:
			ct = "uuid"
		case 156:
			ct = "inet6"
		case 60:
			ct = "inet4"
		}
	}
	switch ct {
	case "uuid":
		return appendUUID
	case "inet6":
		return appendINET6
	case "inet4":
		return appendINET4
	}
	return nil
}

func phaseless(f func(dst, v []byte) ([]byte, error)) encodeFunc {
	return func(dst, v []byte, _ bool) ([]byte, error) { return f(dst, v) }
}

func alwaysNull(dst, _ []byte, _ bool) ([]byte, error) {
	return append(dst, "null"...), nil
}

// stringEncoder writes text in the codec's character set as a JSON string.
func stringEncoder(c *textCodec) func(dst, v []byte) ([]byte, error) {
	if c == utf8Codec {
		return func(dst, v []byte) ([]byte, error) { return appendString(dst, v), nil }
	}
	return func(dst, v []byte) ([]byte, error) {
		dst = append(dst, '"')
		dst = c.appendBody(dst, v)
		return append(dst, '"'), nil
	}
}

func textEncoder(c *textCodec) encodeFunc {
	if c == nil {
		return phaseless(appendBase64)
	}
	return phaseless(stringEncoder(c))
}

// setEncoder writes a SET value, delivered as "x,z" in definition order,
// as a JSON array of member names; the empty set is [].
func setEncoder(c *textCodec) encodeFunc {
	if c == nil {
		c = utf8Codec
	}
	return func(dst, v []byte, _ bool) ([]byte, error) {
		dst = append(dst, '[')
		for start := 0; len(v) > 0 && start <= len(v); {
			end := start
			for end < len(v) && v[end] != ',' {
				end++
			}
			if start > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = c.appendBody(dst, v[start:end])
			dst = append(dst, '"')
			start = end + 1
		}
		return append(dst, ']'), nil
	}
}

// jsonEncoder embeds valid JSON documents and hands anything else to
// fallback.
func jsonEncoder(fallback encodeFunc) encodeFunc {
	return func(dst, v []byte, copyPhase bool) ([]byte, error) {
		if out, ok := appendRawJSON(dst, v); ok {
			return out, nil
		}
		return fallback(dst, v, copyPhase)
	}
}
