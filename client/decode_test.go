package client

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeSamples are events the decoder must read exactly as encoding/json
// does: the gateway's own, and others that leave the fast path.
var decodeSamples = []string{
	`{"type":"change","op":"insert","keyspace":"customer","shard":"-80","table":"customer","key":{"customer_id":5},"before":null,"after":{"customer_id":5,"email":"a@b.c"},"commit_ts":"2026-12-02T15:01:02Z","cursor":"1aQ"}`,
	`{"type":"change","op":"update","keyspace":"k","shard":"0","table":"t","key":{"id":1},"before":{"id":1,"s":"x\"}{"},"after":{"id":1,"s":"[y]","j":{"a":[1,{"b":"}"}]}},"commit_ts":"2026-12-02T15:01:02Z","cursor":"1b","txn_end":true}`,
	`{"type":"change","op":"snapshot","keyspace":"k","shard":"0","table":"t","key":null,"before":null,"after":{"id":2},"commit_ts":null,"cursor":"1c"}`,
	` { "type" : "change" , "op":"delete", "table":"t", "before":{"id":3}, "after":null, "txn_end":false } `,
	`{"type":"change","table":"caf\u00e9","cursor":"1d"}`,
	`{"type":"change","table":"café","cursor":"1e"}`,
	`{"Type":"change","table":"t"}`,
	`{"type":"change","key":"not an object","after":[1,2]}`,
	`{"type":"change","txn_end":1}`,
	`{"type":"change","table":"t","table":"u"}`,
	`{"type":"change","commit_ts":"2026-12-02T15:01:02.123456+02:00"}`,
	`{"type":"reshard","keyspace":"customer","from":["0"],"to":["-80","80-"],"journal_id":"1","cursor":"1f","txn_end":true}`,
	`{"type":"heartbeat","cursor":"1g"}`,
	`{"type":"disconnect","code":4008,"reason":"slow_consumer","message":"m","cursor":"1h"}`,
	`{}`,
	"{\"type\":\"change\",\"table\":\"\xff\"}",
}

func TestDecoderMatchesEncodingJSON(t *testing.T) {
	var d decoder
	for _, s := range decodeSamples {
		var want, got wireEvent
		werr := json.Unmarshal([]byte(s), &want)
		gerr := d.event([]byte(s), &got)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", s, got, gerr, want, werr)
		}
	}
	// Those encoding/json takes in one array, as a batch=txn message.
	arr := "["
	for _, s := range decodeSamples {
		var w wireEvent
		if json.Unmarshal([]byte(s), &w) != nil {
			continue
		}
		if arr != "[" {
			arr += ","
		}
		arr += s
	}
	arr += "]"
	var want []wireEvent
	if err := json.Unmarshal([]byte(arr), &want); err != nil {
		t.Fatal(err)
	}
	got, err := d.message([]byte(arr))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("array: %v\n got %+v\nwant %+v", err, got, want)
	}
}

// What is not JSON is an error, as encoding/json says.
func TestDecoderRefusesMalformed(t *testing.T) {
	var d decoder
	for _, s := range []string{``, `{`, `[`, `[{"type":"change"}`, `{"type":"change",}`, `{"type":"change"} x`,
		`{"type":"change","after":{"a":1}`, `[{"type":"change"},]`, `{"type":tru}`, `{"type":"change","table":"t}`} {
		if _, err := d.message([]byte(s)); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
}

// The scanner never accepts valid JSON differently from encoding/json,
// nor panics on anything.
func FuzzDecoder(f *testing.F) {
	for _, s := range decodeSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d decoder
		var got wireEvent
		gerr := d.event(b, &got)
		if !json.Valid(b) {
			return
		}
		var want wireEvent
		werr := json.Unmarshal(b, &want)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v, %v\nwant %+v, %v", b, got, gerr, want, werr)
		}
	})
}

// An array (a batch=txn message) decodes as encoding/json decodes it, with
// the event twice so that the second reads what the first left behind
// (the strings remembered per member).
func FuzzDecoderArray(f *testing.F) {
	for _, s := range decodeSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		arr := []byte("[" + string(b) + "," + string(b) + "]")
		var d decoder
		got, gerr := d.message(arr)
		if !json.Valid(arr) {
			return
		}
		var want []wireEvent
		werr := json.Unmarshal(arr, &want)
		if (werr == nil) != (gerr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v, %v\nwant %+v, %v", arr, got, gerr, want, werr)
		}
	})
}

// A pull page decodes like encoding/json decodes it.
func TestDecodePage(t *testing.T) {
	var d decoder
	for _, s := range []string{
		`{"events":[` + decodeSamples[0] + `,` + decodeSamples[1] + `],"next_cursor":"1x","up_to_date":true}`,
		`{"events":[],"next_cursor":"","up_to_date":false}`,
		`{"next_cursor":"2y","events":[` + decodeSamples[11] + `],"up_to_date":false,"extra":1}`,
	} {
		var want page
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		got, err := d.page([]byte(s))
		if err != nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v", s, got, err, want)
		}
	}
}
