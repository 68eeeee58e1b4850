package webhook

import (
	"net/http"
	"testing"
	"time"
)

func TestClassifyStatus(t *testing.T) {
	cases := []struct {
		code int
		want class
	}{
		{200, classDelivered}, {201, classDelivered}, {204, classDelivered}, {299, classDelivered},
		{410, classGone},
		{408, classRetry}, {409, classRetry}, {425, classRetry}, {429, classRetry},
		{400, classPermanent}, {401, classPermanent}, {403, classPermanent}, {404, classPermanent},
		{413, classPermanent}, {422, classPermanent}, {499, classPermanent},
		{500, classRetry}, {502, classRetry}, {503, classRetry}, {504, classRetry},
		{301, classRetry}, {302, classRetry}, {307, classRetry},
	}
	for _, c := range cases {
		got, kind := classifyStatus(c.code)
		if got != c.want {
			t.Errorf("%d: %v, want %v", c.code, got, c.want)
		}
		if (got == classDelivered) != (kind == "") {
			t.Errorf("%d: failure kind %q", c.code, kind)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"5", 5 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"Wed, 02 Dec 2026 15:00:30 GMT", 30 * time.Second, true},
		{"Wednesday, 02-Dec-26 15:01:00 GMT", time.Minute, true}, // RFC 850
		{"Wed Dec  2 15:00:10 2026", 10 * time.Second, true},     // asctime
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},   // past: now
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// Delays grow exponentially within ±50% jitter, up to the cap.
func TestBackoffSchedule(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, MaxRetryAfter: time.Minute}
	for range 20 { // jitter is random: check the bounds many times
		eb := b.schedule()
		base := 100 * time.Millisecond
		for i := range 8 {
			d := b.delay(eb, &attempt{})
			lo, hi := base/2, base*3/2+1
			if d < lo || d > hi {
				t.Fatalf("attempt %d: delay %v outside [%v, %v]", i, d, lo, hi)
			}
			base = min(base*2, time.Second)
		}
	}
	// Jitter: two schedules do not agree on every step.
	same := true
	e1, e2 := b.schedule(), b.schedule()
	for range 5 {
		if b.delay(e1, &attempt{}) != b.delay(e2, &attempt{}) {
			same = false
		}
	}
	if same {
		t.Fatal("no jitter")
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, MaxRetryAfter: time.Minute}
	eb := b.schedule()
	if d := b.delay(eb, &attempt{hasRetryAfter: true, retryAfter: 7 * time.Second}); d != 7*time.Second {
		t.Fatalf("Retry-After 7s gave %v", d)
	}
	if d := b.delay(eb, &attempt{hasRetryAfter: true, retryAfter: 0}); d != 0 {
		t.Fatalf("Retry-After 0 gave %v", d)
	}
	if d := b.delay(eb, &attempt{hasRetryAfter: true, retryAfter: 48 * time.Hour}); d != time.Minute {
		t.Fatalf("Retry-After 48h gave %v, want the 1m cap", d)
	}
}
