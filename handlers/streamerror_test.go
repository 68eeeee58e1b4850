package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/reshard"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/upstream"
)

// A stream's failure reaches every transport as one API error: a
// poller's status and code, a WebSocket's close reason (a 409's code),
// an SSE error event's code. Each 409 code is one openapi.yaml lists
// for readers (ReaderConflict).
func TestStreamErrorCodes(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// ReaderConflict's enum: the one that lists subscriber_scope_mismatch.
	var readerConflicts []string
	for _, line := range strings.Split(string(spec), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "enum: [") && strings.Contains(l, "subscriber_scope_mismatch") {
			readerConflicts = strings.Split(strings.Trim(strings.TrimPrefix(l, "enum: "), "[]"), ", ")
		}
	}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&reshard.GapError{Missing: []string{"customer/0"}}, http.StatusConflict, "resume_impossible"},
		{&upstream.TablesDroppedError{}, http.StatusConflict, "tables_dropped"},
		{fmt.Errorf("replaying: %w", hub.ErrSpoolGone), http.StatusConflict, "spool_gone"},
		{fmt.Errorf("reading: %w", store.ErrUnavailable), http.StatusServiceUnavailable, "store_unavailable"},
		{errors.New("rpc error: code = Unknown"), http.StatusBadGateway, "upstream_failed"},
	} {
		var e *Error
		if !errors.As(streamError(tc.err), &e) || e.Status != tc.status || e.Code != tc.code {
			t.Errorf("%v: %+v, want %d %s", tc.err, e, tc.status, tc.code)
			continue
		}
		if tc.status == http.StatusConflict && !slices.Contains(readerConflicts, tc.code) {
			t.Errorf("openapi.yaml's ReaderConflict does not list %s", tc.code)
		}
	}
}
