package handlers

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The close codes and metric labels are part of the API: clients act on
// the codes, dashboards on the labels.
func TestDisconnectsUnchanged(t *testing.T) {
	want := map[int]string{4000: "bad_message", 4001: "shutdown", 4003: "refresh_refused", 4008: "slow_consumer",
		4010: "token_expired", 4011: "upstream_failed"}
	if len(disconnects) != len(want) {
		t.Fatalf("%d disconnects listed, want %d", len(disconnects), len(want))
	}
	for _, d := range disconnects {
		if want[int(d.Code)] != d.Reason || d.label() != d.Reason {
			t.Errorf("%d: reason %q, label %q, want %q", d.Code, d.Reason, d.label(), want[int(d.Code)])
		}
	}
	refused := Disconnect{Code: DisconnectBadMessage.Code, Reason: "invalid_cursor", Message: "…"}
	if refused.label() != "bad_message" {
		t.Errorf("a refused ack counts as %q", refused.label())
	}
	if l := DisconnectUpstream.withMessage("vtgate: gone").label(); l != "upstream_failed" {
		t.Errorf("an upstream failure counts as %q", l)
	}
}

// openapi.yaml documents every close code the gateway sends.
func TestDisconnectsDocumented(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range disconnects {
		if row := fmt.Sprintf("| %d | `%s`", d.Code, d.Reason); !strings.Contains(string(spec), row) {
			t.Errorf("openapi.yaml has no close-code row %q", row)
		}
		codes = append(codes, fmt.Sprint(int(d.Code)))
	}
	if enum := "enum: [" + strings.Join(codes, ", ") + "]"; !strings.Contains(string(spec), enum) {
		t.Errorf("openapi.yaml's Disconnect schema has no %q", enum)
	}
}

// The disconnect message is what it has always been: a JSON object with
// its members in the order encoding/json gives a map's.
func TestDisconnectMessage(t *testing.T) {
	cursor := "abc_-123"
	for _, tc := range []struct {
		d      Disconnect
		cursor *string
	}{
		{DisconnectBadMessage, nil},
		{DisconnectSlow, &cursor},
		{DisconnectUpstream.withMessage(`rpc error: "<&>"`), &cursor},
	} {
		old := map[string]any{"type": "disconnect", "code": int(tc.d.Code), "reason": tc.d.Reason, "message": tc.d.Message}
		if tc.cursor != nil {
			old["cursor"] = *tc.cursor
		}
		want, _ := json.Marshal(old)
		if got := tc.d.message(tc.cursor); string(got) != string(want) {
			t.Errorf("message\n got %s\nwant %s", got, want)
		}
	}
}
