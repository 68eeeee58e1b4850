package auth

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every verification failure is an *Error that unwraps to
// ErrInvalidToken (or ErrNoToken) and to the cause, so callers can test the
// class with errors.Is and read the reason for metrics and messages.
var (
	// ErrNoToken: the request carries no token at all.
	ErrNoToken = errors.New("auth: no token")
	// ErrInvalidToken: a token was given and refused.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrAlgorithm: the token's "alg" is not one the verifier has keys for
	// ("none", HS256 without a secret, RS256 without a JWKS, …).
	ErrAlgorithm = errors.New("auth: signing algorithm not accepted")
	// ErrClaims: the token verified but its claims are unusable (no "sub",
	// a malformed glob).
	ErrClaims = errors.New("auth: invalid claims")
	// ErrConfig: the verifier options are inconsistent.
	ErrConfig = errors.New("auth: invalid configuration")
)

// Reasons a token is refused. They label the vsg_auth_failures_total metric
// and pick the message the client gets, so the set is small and stable.
const (
	ReasonMissing      = "missing"
	ReasonMalformed    = "malformed"
	ReasonSignature    = "bad_signature"
	ReasonExpired      = "expired"
	ReasonNotYetValid  = "not_yet_valid"
	ReasonAudience     = "audience"
	ReasonIssuer       = "issuer"
	ReasonAlgorithm    = "algorithm"
	ReasonUnknownKey   = "unknown_key"
	ReasonClaims       = "claims"
	ReasonUnverifiable = "unverifiable"
)

// Reasons lists every reason, for pre-initialising metrics.
var Reasons = []string{
	ReasonMissing, ReasonMalformed, ReasonSignature, ReasonExpired, ReasonNotYetValid,
	ReasonAudience, ReasonIssuer, ReasonAlgorithm, ReasonUnknownKey, ReasonClaims, ReasonUnverifiable,
}

// Error is a refused token.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("auth: %s: %v", e.Reason, e.Err) }

// Unwrap exposes the class (ErrNoToken or ErrInvalidToken) and the cause.
func (e *Error) Unwrap() []error {
	if e.Reason == ReasonMissing {
		return []error{ErrNoToken, e.Err}
	}
	return []error{ErrInvalidToken, e.Err}
}

// Message is what the client is told: enough to fix its request, nothing
// about keys or configuration.
func (e *Error) Message() string {
	switch e.Reason {
	case ReasonMissing:
		return "a bearer token is required"
	case ReasonMalformed:
		return "the token is not a well-formed JWT"
	case ReasonSignature:
		return "the token signature is invalid"
	case ReasonExpired:
		return "the token has expired"
	case ReasonNotYetValid:
		return "the token is not valid yet"
	case ReasonAudience:
		return "the token is not meant for this audience"
	case ReasonIssuer:
		return "the token is from an unexpected issuer"
	case ReasonAlgorithm:
		return "the token's signing algorithm is not accepted"
	case ReasonUnknownKey:
		return "the token is signed by an unknown key"
	case ReasonClaims:
		return "the token's claims are invalid: " + causeText(e.Err)
	default:
		return "the token cannot be verified"
	}
}

func causeText(err error) string {
	var ce *claimError
	if errors.As(err, &ce) {
		return ce.msg
	}
	return "missing or malformed claims"
}

// claimError says which claim is wrong; its text is safe to show.
type claimError struct{ msg string }

func (e *claimError) Error() string { return e.msg }
func (e *claimError) Unwrap() error { return ErrClaims }
