package event

//go:generate sh -c "go run gen_charsets.go $(go env GOMODCACHE)/vitess.io/vitess@v0.24.4"

import (
	"sync"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/traditionalchinese"
	"vitess.io/vitess/go/mysql/collations/charset"
)

// Text columns arrive as the raw bytes of their column's character set in
// both phases (a latin1 'café' is "caf\xe9"), so the encoder transcodes by
// Field.Charset, which holds a collation id.

// binaryCollation is the collation id of the binary pseudo character set:
// a column with it holds bytes, whatever its type says.
const binaryCollation = 63

// textCodec writes the bytes of one character set as a JSON string body.
type textCodec struct {
	// name is the character set, for diagnostics.
	name string
	// table maps each byte of an 8-bit character set to its character.
	table *[256]rune
	// multi decodes the multi-byte non-UTF-8 character sets (ucs2, utf16,
	// utf32, sjis, gb18030, ...).
	multi runeDecoder
	// enc decodes the character sets Vitess has no table for (big5).
	enc encoding.Encoding
}

// runeDecoder is the part of charset.Charset the encoder uses. DecodeRune
// returns the first character of its input, its width in bytes, and
// whether it was well-formed.
type runeDecoder interface {
	DecodeRune([]byte) (rune, int, bool)
}

// utf8Codec is used for utf8mb3/utf8mb4 and for any collation id this
// package does not know: MariaDB's newer ids (the uca1400 family, 2048 and
// up) are utf8mb3/utf8mb4, and UTF-8 decoding degrades to U+FFFD rather
// than to mojibake if the guess is wrong.
var utf8Codec = &textCodec{name: "utf8mb4"}

var codecCache sync.Map // charset name → *textCodec

// codecForCollation returns the codec for a collation id, or nil for the
// binary character set.
func codecForCollation(id uint32) *textCodec {
	name, ok := collationCharsets[id]
	if !ok {
		return utf8Codec
	}
	switch name {
	case "binary":
		return nil
	case "utf8mb3", "utf8mb4":
		return utf8Codec
	}
	if c, ok := codecCache.Load(name); ok {
		return c.(*textCodec)
	}
	c := newCodec(name)
	actual, _ := codecCache.LoadOrStore(name, c)
	return actual.(*textCodec)
}

func newCodec(name string) *textCodec {
	if runes, ok := eightBitCharsets[name]; ok {
		t := new([256]rune)
		i := 0
		if utf8.RuneCountInString(runes) == 128 {
			for ; i < 128; i++ {
				t[i] = rune(i)
			}
		}
		for _, r := range runes {
			t[i] = r
			i++
		}
		return &textCodec{name: name, table: t}
	}
	var cs runeDecoder
	switch name {
	case "ucs2":
		cs = charset.Charset_ucs2{}
	case "utf16":
		cs = charset.Charset_utf16{}
	case "utf16le":
		cs = charset.Charset_utf16le{}
	case "utf32":
		cs = charset.Charset_utf32{}
	case "sjis":
		cs = charset.Charset_sjis{}
	case "cp932":
		cs = charset.Charset_cp932{}
	case "ujis":
		cs = charset.Charset_ujis{}
	case "eucjpms":
		cs = charset.Charset_eucjpms{}
	case "euckr":
		cs = charset.Charset_euckr{}
	case "gb2312":
		cs = charset.Charset_gb2312{}
	case "gb18030", "gbk":
		// GBK is a subset of GB18030 (same byte sequences for the same
		// characters), so the GB18030 decoder reads GBK text.
		cs = charset.Charset_gb18030{}
	case "big5":
		return &textCodec{name: name, enc: traditionalchinese.Big5}
	default:
		return utf8Codec
	}
	return &textCodec{name: name, multi: cs}
}

// appendBody appends v, in the codec's character set, as an escaped JSON
// string body.
func (c *textCodec) appendBody(dst, v []byte) []byte {
	switch {
	case c.table != nil:
		return c.append8bit(dst, v)
	case c.multi != nil:
		return c.appendMulti(dst, v)
	case c.enc != nil:
		return c.appendTranscoded(dst, v)
	}
	return appendStringBody(dst, v)
}

func (c *textCodec) append8bit(dst, v []byte) []byte {
	t := c.table
	for _, b := range v {
		r := t[b]
		if r < utf8.RuneSelf && safeASCII[r] {
			dst = append(dst, byte(r))
			continue
		}
		dst = appendRune(dst, r)
	}
	return dst
}

func (c *textCodec) appendMulti(dst, v []byte) []byte {
	for len(v) > 0 {
		r, w, ok := c.multi.DecodeRune(v)
		if w <= 0 || w > len(v) {
			// Defensive: a decoder must always make progress.
			w = 1
			ok = false
		}
		if !ok {
			r = utf8.RuneError
		}
		dst = appendRune(dst, r)
		v = v[w:]
	}
	return dst
}
