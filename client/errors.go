package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

var (
	// ErrClosed is what Next and Commit return once Close was called.
	ErrClosed = errors.New("client: closed")
	// ErrOption is what Dial reports for an option it cannot take.
	ErrOption = errors.New("client: invalid option")
)

// The gateway's refusals that retrying cannot fix, matched by their code
// (openapi.yaml, the Error schema): errors.Is(err, ErrStreamNotFound)
// holds for every *Error with code stream_not_found.
var (
	ErrStreamNotFound = &Error{Status: http.StatusNotFound, Code: "stream_not_found"}
	ErrInvalidCursor  = &Error{Status: http.StatusBadRequest, Code: "invalid_cursor"}
	ErrUnauthorized   = &Error{Status: http.StatusUnauthorized, Code: "unauthorized"}
	ErrForbidden      = &Error{Status: http.StatusForbidden, Code: "forbidden"}
	// ErrScopeMismatch: the named subscriber was created with another
	// table scope than the token's (use another subscriber name).
	ErrScopeMismatch = &Error{Status: http.StatusConflict, Code: "subscriber_scope_mismatch"}
	// ErrResumeImpossible: the cursor's shards are gone and the stream's
	// on_gap is fail.
	ErrResumeImpossible = &Error{Status: http.StatusConflict, Code: "resume_impossible"}
	// ErrTablesDropped: the stream's tables were dropped from its keyspace
	// (define the stream on their new keyspace).
	ErrTablesDropped = &Error{Status: http.StatusConflict, Code: "tables_dropped"}
)

// Error is a refusal by the gateway: an HTTP error response, a WebSocket
// close or an SSE error event that says the stream cannot go on as asked.
// Status is the HTTP status (for a WebSocket close, the status of the
// same refusal on the other transports); Code is the gateway's stable
// error code, Message says it for people.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the wait the gateway asked for (Retry-After), if any.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("vstream-gateway: %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("vstream-gateway: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches another *Error with the same code: the sentinels above.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// retryable tells whether asking again later can succeed: 5xx, 429 and
// 408. Other refusals are the application's (or the operator's) to fix.
func (e *Error) retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
}

// cannotContinue lists the codes after which the stream cannot go on from
// the cursor (the 409s of openapi.yaml's StreamCannotContinue).
var cannotContinue = map[string]bool{"resume_impossible": true, "tables_dropped": true}

// conflict makes the *Error of a stream ended with a code that is a 409
// on the HTTP transports (a WebSocket close reason, an SSE error event).
func conflict(code, message string) *Error {
	return &Error{Status: http.StatusConflict, Code: code, Message: message}
}

// readError reads a gateway error response. A body that is not the
// gateway's JSON (a proxy's page) still gives the status.
func readError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode)}
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
			e.Code, e.Message = body.Error.Code, body.Error.Message
		} else {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
