package event

import querypb "vitess.io/vitess/go/vt/proto/query"

// What the tests of other formats (package event_test) read of the measured
// alltypes table.

// AllTypesFields are the alltypes table's FIELD entries.
func AllTypesFields() []*querypb.Field { return allTypesFields() }

// AllTypesRow is the alltypes row with sample k of every column (wrapping
// around) in the given phase.
func AllTypesRow(k int, copyPhase bool) *querypb.Row {
	r, _ := allTypesRow(k, copyPhase)
	return r
}

// AllTypesOptions marks alltypes' c_json as JSON.
var AllTypesOptions = allTypesJSON

// AllTypesSamples is the most samples any alltypes column has.
func AllTypesSamples() int {
	n := 0
	for _, c := range allTypes {
		n = max(n, len(c.samples))
	}
	return n
}
