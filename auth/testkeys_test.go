package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// signer is one asymmetric key published in the test JWKS.
type signer struct {
	kid    string
	method jwt.SigningMethod
	priv   any
	pub    any
	alg    jwkset.ALG
}

func newRSA(t testing.TB, kid string) *signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, method: jwt.SigningMethodRS256, priv: k, pub: &k.PublicKey, alg: jwkset.AlgRS256}
}

func newEC(t testing.TB, kid string) *signer {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, method: jwt.SigningMethodES256, priv: k, pub: &k.PublicKey, alg: jwkset.AlgES256}
}

func newEd(t testing.TB, kid string) *signer {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, method: jwt.SigningMethodEdDSA, priv: priv, pub: pub, alg: jwkset.AlgEdDSA}
}

func (s *signer) sign(t testing.TB, c jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.method, c)
	tok.Header["kid"] = s.kid
	out, err := tok.SignedString(s.priv)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// jwksServer publishes a JWK set that tests can rotate.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	signers []*signer
	fetches atomic.Int32
}

func newJWKSServer(t testing.TB, signers ...*signer) *jwksServer {
	j := &jwksServer{signers: signers}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.fetches.Add(1)
		j.mu.Lock()
		defer j.mu.Unlock()
		var set jwkset.JWKSMarshal
		for _, s := range j.signers {
			jwk, err := jwkset.NewJWKFromKey(s.pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: s.kid, ALG: s.alg}})
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			set.Keys = append(set.Keys, jwk.Marshal())
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(j.Close)
	return j
}

func (j *jwksServer) publish(signers ...*signer) {
	j.mu.Lock()
	j.signers = signers
	j.mu.Unlock()
}

// claims returns valid claims for sub, expiring in an hour.
func claims(sub string) *Claims {
	now := time.Now()
	return &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   sub,
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
			IssuedAt:  jwt.NewNumericDate(now),
		},
		Streams: []string{"orders-*"},
		Tables:  []string{"customer.corder"},
	}
}

func hs256(t testing.TB, secret []byte, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
