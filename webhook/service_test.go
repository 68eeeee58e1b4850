package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

func TestCreateDefaults(t *testing.T) {
	e := newEnv(t)
	v, err := e.svc.Create(context.Background(), testDef, &CreateRequest{URL: "http://127.0.0.1:9/hook"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.ID, "wh_") || len(v.ID) != 19 || v.Subscriber != "webhook."+v.ID || v.Stream != testDef.Name {
		t.Fatalf("identity %+v", v)
	}
	if _, err := ParseSecret(v.Secret); err != nil {
		t.Fatalf("generated secret %q: %v", v.Secret, err)
	}
	if v.BatchMaxEvents != DefaultBatchMaxEvents || v.BatchMaxBytes != DefaultBatchMaxBytes || v.MaxAttempts != DefaultMaxAttempts || v.Timeout.D() != DefaultTimeout || v.BatchMaxWait != 0 {
		t.Fatalf("defaults %+v", v)
	}
	if v.State != StateActive || v.Cursor != "tok-1" || v.DeadLetters != 0 || v.Format != "default" || v.Schemas {
		t.Fatalf("state %+v", v)
	}
	dbz, err := e.svc.Create(context.Background(), testDef, &CreateRequest{URL: "http://127.0.0.1:9/hook", Format: "debezium", Schemas: true})
	if err != nil || dbz.Format != "debezium" || !dbz.Schemas {
		t.Fatalf("debezium webhook: %+v %v", dbz, err)
	}
	// The secret is shown once: not by Get or List.
	got, err := e.svc.Get(context.Background(), testDef.Name, v.ID)
	if err != nil || got.Secret != "" {
		t.Fatalf("get: %+v %v", got, err)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "whsec_") {
		t.Fatalf("secret in %s", b)
	}
	list, err := e.svc.List(context.Background(), testDef.Name)
	if err != nil || len(list) != 2 || list[0].Secret != "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if other, _ := e.svc.List(context.Background(), "other"); len(other) != 0 {
		t.Fatal("webhook listed under another stream")
	}
	if _, err := e.svc.Get(context.Background(), "other", v.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get under another stream: %v", err)
	}
}

func TestCreateStart(t *testing.T) {
	e := newEnv(t)
	e.log.addN(4, 1)
	ctx := context.Background()
	// From a cursor.
	v, err := e.svc.Create(ctx, testDef, &CreateRequest{URL: "http://127.0.0.1:9/", Cursor: "tok-2"})
	if err != nil || e.cursorN(v.ID) != 2 {
		t.Fatalf("from a cursor: %v at %d", err, e.cursorN(v.ID))
	}
	// A bad cursor is a cursor error.
	var ce *hub.CursorError
	if _, err := e.svc.Create(ctx, testDef, &CreateRequest{URL: "http://127.0.0.1:9/", Cursor: "garbage"}); !errors.As(err, &ce) {
		t.Fatalf("bad cursor: %v", err)
	}
	// A snapshot stream's webhook starts with the snapshot: no cursor.
	snap := &streams.Definition{Name: "snap", Keyspace: "ks", Start: streams.StartSnapshot}
	v, err = e.svc.Create(ctx, snap, &CreateRequest{URL: "http://127.0.0.1:9/"})
	if err != nil || v.Cursor != "" {
		t.Fatalf("snapshot stream: %+v %v", v, err)
	}
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	d := func(x time.Duration) *Duration { v := Duration(x); return &v }
	cases := map[string]struct {
		req   CreateRequest
		field string
	}{
		"no url":           {CreateRequest{}, "url"},
		"not http":         {CreateRequest{URL: "ftp://x.example/"}, "url"},
		"credentials":      {CreateRequest{URL: "http://u:p@127.0.0.1/"}, "url"},
		"batch too big":    {CreateRequest{URL: "http://127.0.0.1/", BatchMaxEvents: MaxBatchMaxEvents + 1}, "batch_max_events"},
		"batch negative":   {CreateRequest{URL: "http://127.0.0.1/", BatchMaxEvents: -1}, "batch_max_events"},
		"bytes too small":  {CreateRequest{URL: "http://127.0.0.1/", BatchMaxBytes: MinBatchMaxBytes - 1}, "batch_max_bytes"},
		"bytes too big":    {CreateRequest{URL: "http://127.0.0.1/", BatchMaxBytes: MaxBatchMaxBytes + 1}, "batch_max_bytes"},
		"bytes negative":   {CreateRequest{URL: "http://127.0.0.1/", BatchMaxBytes: -1}, "batch_max_bytes"},
		"wait too long":    {CreateRequest{URL: "http://127.0.0.1/", BatchMaxWait: d(2 * time.Minute)}, "batch_max_wait"},
		"wait negative":    {CreateRequest{URL: "http://127.0.0.1/", BatchMaxWait: d(-time.Second)}, "batch_max_wait"},
		"attempts":         {CreateRequest{URL: "http://127.0.0.1/", MaxAttempts: MaxMaxAttempts + 1}, "max_attempts"},
		"timeout short":    {CreateRequest{URL: "http://127.0.0.1/", Timeout: d(time.Millisecond)}, "timeout"},
		"timeout long":     {CreateRequest{URL: "http://127.0.0.1/", Timeout: d(time.Hour)}, "timeout"},
		"secret prefix":    {CreateRequest{URL: "http://127.0.0.1/", Secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "secret"},
		"secret too short": {CreateRequest{URL: "http://127.0.0.1/", Secret: "whsec_c2hvcnQ="}, "secret"},
		"format":           {CreateRequest{URL: "http://127.0.0.1/", Format: "avro"}, "format"},
		"schemas":          {CreateRequest{URL: "http://127.0.0.1/", Schemas: true}, "schemas"},
		"schemas, default": {CreateRequest{URL: "http://127.0.0.1/", Format: "default", Schemas: true}, "schemas"},
	}
	for name, c := range cases {
		_, err := e.svc.Create(context.Background(), testDef, &c.req)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a %s error", name, err, c.field)
		}
	}
}

func TestCreateRefusesPrivateAddresses(t *testing.T) {
	e := newEnv(t, WithAllowPrivate(false), WithResolver(mapResolver{"hooks.example.com": {"93.184.215.14"}, "sneaky.example": {"10.1.1.1"}}))
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8080/", "http://sneaky.example/", "http://[::1]/", "http://169.254.169.254/"} {
		if _, err := e.svc.Create(ctx, testDef, &CreateRequest{URL: u}); !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if _, err := e.svc.Create(ctx, testDef, &CreateRequest{URL: "https://hooks.example.com/in"}); err != nil {
		t.Fatal(err)
	}
}

func TestDurationJSON(t *testing.T) {
	var r CreateRequest
	if err := json.Unmarshal([]byte(`{"url":"x","batch_max_wait":"250ms","timeout":2.5}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.BatchMaxWait.D() != 250*time.Millisecond || r.Timeout.D() != 2500*time.Millisecond {
		t.Fatalf("%v %v", r.BatchMaxWait.D(), r.Timeout.D())
	}
	for _, bad := range []string{`{"timeout":"soon"}`, `{"timeout":true}`, `{"timeout":1e300}`} {
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	b, _ := json.Marshal(Duration(1500 * time.Millisecond))
	if string(b) != `"1.5s"` {
		t.Fatalf("%s", b)
	}
}

func TestDeleteStreamDeletesOnlyItsWebhooks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	other := &streams.Definition{Name: "other", Keyspace: testDef.Keyspace, Tables: testDef.Tables}
	a, err := e.svc.Create(ctx, testDef, &CreateRequest{URL: "http://127.0.0.1:9/a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Create(ctx, testDef, &CreateRequest{URL: "http://127.0.0.1:9/b"}); err != nil {
		t.Fatal(err)
	}
	kept, err := e.svc.Create(ctx, other, &CreateRequest{URL: "http://127.0.0.1:9/c"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteStream(ctx, testDef.Name); err != nil {
		t.Fatal(err)
	}
	if list, err := e.svc.List(ctx, testDef.Name); err != nil || len(list) != 0 {
		t.Fatalf("webhooks left on the deleted stream: %+v %v", list, err)
	}
	if _, err := e.svc.Get(ctx, testDef.Name, a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get a deleted webhook: %v", err)
	}
	if list, err := e.svc.List(ctx, "other"); err != nil || len(list) != 1 || list[0].ID != kept.ID {
		t.Fatalf("the other stream's webhooks: %+v %v", list, err)
	}
	if err := e.svc.DeleteStream(ctx, "none"); err != nil {
		t.Fatalf("a stream without webhooks: %v", err)
	}
}
