package debezium

import (
	"strconv"
	"strings"

	"github.com/vstream-gateway/vstream-gateway/event"
)

// Kafka Connect schemas, as the JSON converter writes them with
// schemas.enable=true: built once per table version and stream name
// (event.Schema.Derived) and copied into every event of the table.

// table is what the encoder keeps per table version and stream.
type table struct {
	cols []column
	// byName finds a column when an image's members are not in the
	// schema's order (never, for events the gateway encoded).
	byName map[string]int
	hasPK  bool
	// keySchema is the key's {"schema":…} document.
	keySchema []byte
	// schemaTail ends a value document with schemas: its "schema" member
	// (the envelope's schema) and closing brace, the same for every event
	// of the table version.
	schemaTail []byte
	// sourceTable is the source block's keyspace and table, up to the
	// shard's value.
	sourceTable []byte
}

type column struct {
	*event.Column
	quoted []byte // "name"
	member []byte // "name":
}

func compile(s *event.Schema, stream string) *table {
	t := &table{byName: make(map[string]int, len(s.Columns))}
	t.sourceTable = appendString(nil, s.Keyspace)
	t.sourceTable = append(t.sourceTable, `,"table":`...)
	t.sourceTable = appendString(t.sourceTable, s.Table)
	t.sourceTable = append(t.sourceTable, `,"shard":`...)
	for i := range s.Columns {
		c := &s.Columns[i]
		q := appendString(nil, c.Name)
		t.cols = append(t.cols, column{Column: c, quoted: q, member: append(append([]byte(nil), q...), ':')})
		t.byName[string(q)] = i
		t.hasPK = t.hasPK || c.PK
	}
	prefix := stream + "." + s.Keyspace + "." + s.Table
	t.keySchema = t.structSchema(prefix+".Key", false, "", true)
	t.schemaTail = append(append([]byte(`,"schema":`), envelopeSchema(t, prefix)...), '}')
	return t
}

// structSchema is a struct of the table's columns (only the key's with
// keyOnly).
func (t *table) structSchema(name string, optional bool, field string, keyOnly bool) []byte {
	b := []byte(`{"type":"struct","fields":[`)
	n := 0
	for i := range t.cols {
		c := &t.cols[i]
		if keyOnly && !c.PK {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = columnSchema(b, c)
	}
	b = append(b, `],"optional":`...)
	b = strconv.AppendBool(b, optional)
	b = append(b, `,"name":`...)
	b = appendString(b, name)
	if field != "" {
		b = append(b, `,"field":`...)
		b = appendString(b, field)
	}
	return append(b, '}')
}

// columnSchema is one column's field schema: its literal type, and its
// semantic type where the connector gives one.
func columnSchema(b []byte, c *column) []byte {
	typ, name, params := connectType(c.Column)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","optional":`...)
	b = strconv.AppendBool(b, c.Optional)
	if name != "" {
		b = append(b, `,"name":"`...)
		b = append(b, name...)
		b = append(b, `","version":1`...)
	}
	if params != nil {
		b = append(b, `,"parameters":{`...)
		for i := 0; i < len(params); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, params[i])
			b = append(b, ':')
			b = appendString(b, params[i+1])
		}
		b = append(b, '}')
	}
	b = append(b, `,"field":`...)
	b = append(b, c.quoted...)
	return append(b, '}')
}

// connectType maps a column kind to the connector's Kafka Connect type:
// the literal type, the semantic type's name, and its parameters (name,
// value pairs).
func connectType(c *event.Column) (typ, name string, params []string) {
	switch c.Kind {
	case event.KindInt16:
		return "int16", "", nil
	case event.KindInt32:
		return "int32", "", nil
	case event.KindInt64:
		return "int64", "", nil
	case event.KindFloat:
		return "double", "", nil
	case event.KindBit:
		if c.Length <= 1 {
			return "boolean", "", nil
		}
		return "bytes", "io.debezium.data.Bits", []string{"length", strconv.FormatUint(uint64(c.Length), 10)}
	case event.KindDate:
		return "int32", "io.debezium.time.Date", nil
	case event.KindDateTime:
		if c.Decimals <= 3 {
			return "int64", "io.debezium.time.Timestamp", nil
		}
		return "int64", "io.debezium.time.MicroTimestamp", nil
	case event.KindTimestamp:
		return "string", "io.debezium.time.ZonedTimestamp", nil
	case event.KindTime:
		return "int64", "io.debezium.time.MicroTime", nil
	case event.KindBytes, event.KindGeometry:
		return "bytes", "", nil
	case event.KindEnum:
		return "string", "io.debezium.data.Enum", []string{"allowed", strings.Join(c.Values, ",")}
	case event.KindSet:
		return "string", "io.debezium.data.EnumSet", []string{"allowed", strings.Join(c.Values, ",")}
	case event.KindJSON:
		return "string", "io.debezium.data.Json", nil
	}
	// Text, DECIMAL (decimal.handling.mode=string), BIGINT UNSIGNED and
	// YEAR (strings in the connector), and anything unknown.
	return "string", "", nil
}

// sourceSchema is io.debezium.connector.vitess.Source.
const sourceSchema = `{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"version"},` +
	`{"type":"string","optional":false,"field":"connector"},` +
	`{"type":"string","optional":false,"field":"name"},` +
	`{"type":"int64","optional":false,"field":"ts_ms"},` +
	`{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},` +
	`{"type":"string","optional":false,"field":"db"},` +
	`{"type":"string","optional":true,"field":"sequence"},` +
	`{"type":"string","optional":false,"field":"keyspace"},` +
	`{"type":"string","optional":false,"field":"table"},` +
	`{"type":"string","optional":false,"field":"shard"},` +
	`{"type":"string","optional":false,"field":"vgtid"}` +
	`],"optional":false,"name":"io.debezium.connector.vitess.Source","field":"source"}`

// transactionSchema is Debezium's transaction block (event.block).
const transactionSchema = `{"type":"struct","fields":[` +
	`{"type":"string","optional":false,"field":"id"},` +
	`{"type":"int64","optional":false,"field":"total_order"},` +
	`{"type":"int64","optional":false,"field":"data_collection_order"}` +
	`],"optional":true,"name":"event.block","version":1,"field":"transaction"}`

func envelopeSchema(t *table, prefix string) []byte {
	b := []byte(`{"type":"struct","fields":[`)
	b = append(b, t.structSchema(prefix+".Value", true, "before", false)...)
	b = append(b, ',')
	b = append(b, t.structSchema(prefix+".Value", true, "after", false)...)
	b = append(b, ',')
	b = append(b, sourceSchema...)
	b = append(b, `,{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"},`...)
	b = append(b, transactionSchema...)
	b = append(b, `],"optional":false,"name":`...)
	b = appendString(b, prefix+".Envelope")
	return append(b, '}')
}
