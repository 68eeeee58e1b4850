package auth

import (
	"context"
	"errors"
	"testing"
)

// FuzzVerify: no input makes the verifier panic or accept a token it was
// not given the key for.
func FuzzVerify(f *testing.F) {
	v := mustVerifier(f, WithHMACSecrets(secretA))
	good := hs256(f, secretA, claims("a"))
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := v.Verify(context.Background(), raw)
		if err == nil {
			if raw != good && p.Subject != "a" {
				t.Errorf("accepted %q as %+v", raw, p)
			}
			return
		}
		var ae *Error
		if !errors.As(err, &ae) || ae.Message() == "" {
			t.Errorf("untyped error %v", err)
		}
	})
}
