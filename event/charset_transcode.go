package event

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/transform"
)

// Vitess has no conversion table for Big5, so Big5 text goes through
// x/text's decoder (the WHATWG Big5 index: Big5 with the HKSCS
// extensions, a superset of what a MariaDB/MySQL big5 column can hold).
// The other East Asian sets stay on Vitess's tables: they follow the
// server's own mappings (sjis 0x815F is U+005C as in MySQL, not U+FF3C as
// in Windows-31J; the gbk and eucjpms user-defined areas map to the
// private-use characters the server uses), where x/text follows WHATWG.

// transcodeBufs holds scratch space for the UTF-8 form of a value before
// it is escaped.
var transcodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxPooledTranscode keeps an occasional huge value's buffer out of the
// pool.
const maxPooledTranscode = 64 << 10

// appendTranscoded appends v, decoded to UTF-8 by c.enc, as an escaped
// JSON string body. Bytes that are not valid in the character set become
// U+FFFD.
func (c *textCodec) appendTranscoded(dst, v []byte) []byte {
	bp := transcodeBufs.Get().(*[]byte)
	u := transcode(c.enc.NewDecoder(), (*bp)[:0], v)
	dst = appendReplacing(dst, u)
	if cap(u) <= maxPooledTranscode {
		*bp = u[:0]
		transcodeBufs.Put(bp)
	}
	return dst
}

// replacement is U+FFFD in UTF-8.
var replacement = []byte(string(utf8.RuneError))

// appendReplacing appends valid UTF-8 as an escaped JSON string body, with
// U+FFFD written as \ufffd like the other character sets' decoders do, so
// that a replaced byte is visible as such in the JSON text.
func appendReplacing(dst, u []byte) []byte {
	for {
		i := bytes.Index(u, replacement)
		if i < 0 {
			return appendStringBody(dst, u)
		}
		dst = appendStringBody(dst, u[:i])
		dst = appendRune(dst, utf8.RuneError)
		u = u[i+len(replacement):]
	}
}

// transcode appends src, transformed by t, to dst.
func transcode(t transform.Transformer, dst, src []byte) []byte {
	for {
		// A double-byte character is at most 4 bytes of UTF-8, and an
		// invalid byte is 3 (U+FFFD): 3 per input byte always fits, and
		// ErrShortDst only asks for more room.
		dst = slices.Grow(dst, 3*len(src)+utf8.UTFMax)
		n, m, err := t.Transform(dst[len(dst):cap(dst)], src, true)
		dst, src = dst[:len(dst)+n], src[m:]
		switch {
		case err == nil:
			return dst
		case errors.Is(err, transform.ErrShortDst):
		default:
			// x/text's decoders write U+FFFD for malformed input rather
			// than fail; should one fail, do the same and go on.
			dst = utf8.AppendRune(dst, utf8.RuneError)
			if len(src) == 0 {
				return dst
			}
			src = src[1:]
		}
	}
}
