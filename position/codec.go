package position

import (
	"google.golang.org/protobuf/proto"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
)

// deterministic fixes the encoding: the same position always gives the
// same bytes. Encoded positions are hashed (webhook message ids,
// content-addressed cursor references) and stored side by side with
// positions encoded by other replicas, so the encoding must not depend
// on who wrote it.
var deterministic = proto.MarshalOptions{Deterministic: true}

// Marshal encodes p as a protobuf VGtid, deterministically: identical
// positions give identical bytes. A position without entries encodes to
// no bytes.
func (p Position) Marshal() ([]byte, error) {
	if p.IsZero() {
		return nil, nil
	}
	b, err := deterministic.Marshal(p.v)
	if err != nil {
		return nil, &Error{Kind: ErrCorrupt, Err: err}
	}
	return b, nil
}

// Unmarshal decodes what Marshal encoded (or any protobuf VGtid). No bytes
// decode to a position without entries.
func Unmarshal(b []byte) (Position, error) {
	v := &binlogdatapb.VGtid{}
	if err := proto.Unmarshal(b, v); err != nil {
		return Position{}, &Error{Kind: ErrCorrupt, Err: err}
	}
	return Position{v: v}, nil
}
