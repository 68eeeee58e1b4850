package hub

import (
	"errors"
	"testing"
	"time"
)

// An option refuses a value it cannot take, and New says which.
func TestOptionsValidate(t *testing.T) {
	for name, o := range map[string]Option{
		"nil logger":          WithLogger(nil),
		"zero park TTL":       WithParkTTL(0),
		"negative tail bound": WithTails(TailOptions{RingBytes: -1}),
		"negative grace":      WithSpoolGrace(-time.Second),
		"nil rebuilder":       WithRebuilder(nil, nil),
		"nil move watch":      WithMoveWatch(nil),
		"no loss clock":       WithStoreLoss(nil, time.Hour),
	} {
		if h, err := New(nil, nil, nil, o); !errors.Is(err, ErrOption) || h != nil {
			t.Errorf("%s: New = %v, %v; want ErrOption", name, h, err)
		}
	}
	h, err := New(nil, nil, nil, WithParkTTL(time.Second), WithSpoolGrace(0), WithTails(TailOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.parkTTL != time.Second || h.spoolGrace != 0 || h.tailOpts.RingEntries != 0 {
		t.Fatalf("options not applied: park %v grace %v tails %+v", h.parkTTL, h.spoolGrace, h.tailOpts)
	}
}
