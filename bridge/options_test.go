package bridge

import (
	"errors"
	"testing"
	"time"
)

// An option refuses a value it cannot take, and New says which.
func TestOptionsValidate(t *testing.T) {
	for name, o := range map[string]Option{
		"nil logger":   WithLogger(nil),
		"empty holder": WithHolder(""),
		"short lease":  WithMoveLease(time.Millisecond),
		"zero timeout": WithTimeout(0),
		"zero stall":   WithStall(0),
		"no spool":     WithSpoolLimit(0, 1),
		"nil topology": WithTopology(nil),
	} {
		if b, err := New(nil, nil, nil, o); !errors.Is(err, ErrOption) || b != nil {
			t.Errorf("%s: New = %v, %v; want ErrOption", name, b, err)
		}
	}
	b, err := New(nil, nil, nil, WithHolder("r1"), WithStall(time.Second), WithSpoolLimit(10, 20))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.opts.holder != "r1" || b.opts.stall != time.Second || b.opts.maxEvents != 10 || b.opts.maxBytes != 20 {
		t.Fatalf("options not applied: %+v", b.opts)
	}
}
