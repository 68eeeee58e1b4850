package debezium

import "github.com/vstream-gateway/vstream-gateway/event"

// transcode re-encodes the row image at j[i:] (the default format's
// object, members in column order) into dst, and its primary-key columns
// into key when key is not nil, in one pass. It returns where the image
// ends in j. The members whose values the default format already writes
// as the connector does (verbatim) are copied in runs, with their names
// and commas, rather than one at a time: most of a typical row.
func (t *table) transcode(dst, key, j []byte, i int) (_, _ []byte, end int, ok bool) {
	if i >= len(j) || j[i] != '{' {
		return dst, key, -1, false
	}
	if key != nil {
		key = append(key, '{')
	}
	run := i // j[run:i] is yet to be copied as it is
	i++
	nk := 0
	for c := 0; ; c++ {
		if i >= len(j) {
			return dst, key, -1, false
		}
		if j[i] == '}' {
			i++
			break
		}
		if c > 0 {
			if j[i] != ',' {
				return dst, key, -1, false
			}
			i++
		}
		col, member := t.member(c, j, i)
		if member == nil {
			return dst, key, -1, false
		}
		i += len(member)
		vend := skipValue(j, i)
		if vend < 0 {
			return dst, key, -1, false
		}
		v := j[i:vend]
		if v[0] != 'n' && !verbatim(col.Kind) {
			dst = append(dst, j[run:i]...)
			dst = appendValue(dst, col, v)
			run = vend
		}
		i = vend
		if key != nil && col.PK {
			if nk > 0 {
				key = append(key, ',')
			}
			nk++
			key = append(key, member...)
			key = appendValue(key, col, v)
		}
	}
	dst = append(dst, j[run:i]...)
	if key != nil {
		key = append(key, '}')
	}
	return dst, key, i, true
}

// member finds the column of the image's c-th member at j[i:] and returns
// it with the member's bytes (`"name":`; nil if malformed): by position
// (images hold every column in order), else by name. An unknown column's
// value is passed through.
func (t *table) member(c int, j []byte, i int) (*event.Column, []byte) {
	if c < len(t.cols) {
		m := t.cols[c].member
		if len(j)-i >= len(m) && string(j[i:i+len(m)]) == string(m) {
			return t.cols[c].Column, j[i : i+len(m)]
		}
	}
	end := skipString(j, i)
	if end < 0 || end >= len(j) || j[end] != ':' {
		return nil, nil
	}
	if k, ok := t.byName[string(j[i:end])]; ok {
		return t.cols[k].Column, j[i : end+1]
	}
	return &unknownColumn, j[i : end+1]
}

var unknownColumn = event.Column{Kind: event.KindUnknown, Optional: true}
