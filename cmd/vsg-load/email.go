package main

import (
	"bytes"
	"strconv"
)

// Rows written by the load tool carry their identity in the email column:
// load-<run>-<seq>-<unixnano>@x. The run id keeps concurrent or earlier runs
// (and other writers of the table) apart; seq is the writer's sequence
// number, the unit of loss and duplicate accounting; unixnano is taken just
// before the INSERT is sent, so receive time minus it is the commit→reader
// latency (including the insert's own round trip).

// emailFor returns the email value of row seq of run written at ts (Unix ns).
func emailFor(run string, seq int64, ts int64) string {
	b := make([]byte, 0, 48)
	b = append(b, "load-"...)
	b = append(b, run...)
	b = append(b, '-')
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, "@x"...)
	return string(b)
}

// rowMarker is what precedes the sequence number of run's rows in event
// JSON: the opening quote of the string value keeps run "ab" from matching
// run "xab".
func rowMarker(run string) []byte { return []byte(`"load-` + run + "-") }

// scanRows calls f for every row of the run found in msg (one event, an
// SSE data line, a JSON array of a transaction, or a Centrifugo frame with
// several publications), in order. It parses no JSON: messages are scanned
// for the marker, which costs far less per message than decoding them and
// keeps the load tool's CPU small next to the server's. Malformed matches
// are reported with ok=false through bad.
func scanRows(msg, marker []byte, f func(seq, ts int64)) (bad int) {
	for {
		i := bytes.Index(msg, marker)
		if i < 0 {
			return bad
		}
		msg = msg[i+len(marker):]
		seq, rest, ok := digitsUntil(msg, '-')
		if !ok {
			bad++
			continue
		}
		ts, rest, ok := digitsUntil(rest, '@')
		if !ok {
			bad++
			continue
		}
		f(seq, ts)
		msg = rest
	}
}

// digitsUntil parses a non-negative decimal number ending at sep and returns
// it with what follows sep.
func digitsUntil(b []byte, sep byte) (n int64, rest []byte, ok bool) {
	i := 0
	for ; i < len(b) && i < 19; i++ {
		c := b[i]
		if c == sep {
			break
		}
		if c < '0' || c > '9' {
			return 0, nil, false
		}
		n = n*10 + int64(c-'0')
	}
	if i == 0 || i >= len(b) || b[i] != sep {
		return 0, nil, false
	}
	return n, b[i+1:], true
}

// stringField returns the value of the last JSON string member name (given
// as `"name":"`) in msg, or nil: in a transaction array, the last event's.
// Cursors are URL-safe tokens without escapes, so the value ends at the
// next quote.
func stringField(msg, name []byte) []byte {
	// The cursor is near a message's end: look back from there at each
	// byte that starts name (bytes.LastIndex hashes every byte it passes,
	// a tenth of the tool's CPU at K = 1,000).
	i := len(msg)
	for {
		i = bytes.LastIndexByte(msg[:i], name[0])
		if i < 0 {
			return nil
		}
		if bytes.HasPrefix(msg[i:], name) {
			break
		}
	}
	v := msg[i+len(name):]
	j := bytes.IndexByte(v, '"')
	if j < 0 {
		return nil
	}
	return v[:j]
}
