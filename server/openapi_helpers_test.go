package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	vsg "github.com/vstream-gateway/vstream-gateway"
)

// The spec is parsed once per test binary: every response check uses it.
var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadSpec parses and validates the embedded openapi.yaml and builds a
// router over it.
func loadSpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		ctx := context.Background()
		loader := openapi3.NewLoader()
		loader.Context = ctx
		doc, err := loader.LoadFromData(vsg.OpenAPI)
		if err != nil {
			specErr = fmt.Errorf("load openapi.yaml: %w", err)
			return
		}
		if err := doc.Validate(ctx); err != nil {
			specErr = fmt.Errorf("validate openapi.yaml: %w", err)
			return
		}
		r, err := gorillamux.NewRouter(doc)
		if err != nil {
			specErr = fmt.Errorf("router over openapi.yaml: %w", err)
			return
		}
		specDoc, specRouter = doc, r
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	return specDoc, specRouter
}

// validateResponse fails t unless resp (whose body was read into body) is
// what openapi.yaml promises for req: a documented status, the documented
// headers, and a body matching the documented schema for its content type.
// Requests the spec has no operation for must get the router's JSON 404
// (under /v1/) or 405.
func validateResponse(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	if err := checkResponse(req, resp.StatusCode, resp.Header, body); err != nil {
		t.Errorf("%s %s → %d does not match openapi.yaml: %v\nbody: %s", req.Method, req.URL, resp.StatusCode, err, truncate(body, 2000))
	}
}

// checkResponse is validateResponse returning the mismatch, so that tests
// can show the check rejects what it should.
func checkResponse(req *http.Request, status int, header http.Header, body []byte) error {
	doc, router := specDoc, specRouter
	if doc == nil {
		return errors.New("spec not loaded: call loadSpec first")
	}
	ctx := context.Background()
	route, pathParams, err := router.FindRoute(req)
	if err != nil {
		// No operation: the gateway's own fallbacks answer, which the spec
		// documents as reusable responses.
		var name string
		switch {
		case errors.Is(err, routers.ErrMethodNotAllowed):
			name, err = "MethodNotAllowed", expectStatus(status, http.StatusMethodNotAllowed)
		case errors.Is(err, routers.ErrPathNotFound) && strings.HasPrefix(req.URL.Path, "/v1/"):
			name, err = "NotFound", expectStatus(status, http.StatusNotFound)
		default:
			return fmt.Errorf("no operation in the spec for %s %s: %w", req.Method, req.URL.Path, err)
		}
		if err != nil {
			return err
		}
		return checkBody(doc.Components.Responses[name].Value.Content, header, body)
	}

	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: pathParams,
			Route:      route,
		},
		Status: status,
		Header: header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	ct := mediaType(header)
	// Streamed and line-delimited bodies have no body decoder in
	// openapi3filter: headers and status are checked by it, the body here.
	custom := ct == "application/x-ndjson" || ct == "text/event-stream"
	input.Options.ExcludeResponseBody = custom
	input.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, input); err != nil {
		return err
	}
	if !custom {
		return nil
	}
	resp := route.Operation.Responses.Status(status)
	if resp == nil {
		resp = route.Operation.Responses.Default()
	}
	return checkBody(resp.Value.Content, header, body)
}

func expectStatus(got, want int) error {
	if got != want {
		return fmt.Errorf("status %d, want %d", got, want)
	}
	return nil
}

// checkBody validates body against the schema content documents for the
// response's content type. NDJSON is checked line by line against the
// schema of one line; an event stream only for its content type.
func checkBody(content openapi3.Content, header http.Header, body []byte) error {
	ct := mediaType(header)
	mt := content.Get(ct)
	if mt == nil {
		return fmt.Errorf("content type %q is not documented for this response", ct)
	}
	if mt.Schema == nil || ct == "text/event-stream" {
		return nil
	}
	schema := mt.Schema.Value
	visit := func(raw []byte) error {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("body is not JSON: %w", err)
		}
		return schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
	}
	if ct != "application/x-ndjson" {
		return visit(body)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		if err := visit(sc.Bytes()); err != nil {
			return fmt.Errorf("NDJSON line %d: %w", n, err)
		}
	}
	if len(body) > 0 && body[len(body)-1] != '\n' {
		return errors.New("NDJSON body does not end with a newline")
	}
	return sc.Err()
}

func mediaType(h http.Header) string {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// doRequest serves req on h and returns the response with its body read,
// after checking both against the spec.
func doRequest(t testing.TB, h http.Handler, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	body, _ := io.ReadAll(resp.Body)
	validateResponse(t, req, resp, body)
	return resp, body
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "…"...)
	}
	return b
}
