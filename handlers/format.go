package handlers

import (
	"context"
	"errors"
	"net/http"

	"github.com/vstream-gateway/vstream-gateway/feed"
)

// formatParam reads a reader's format and schemas query parameters
// (DESIGN §3.2): the event format it receives, the default one when
// absent (nil).
func formatParam(r *http.Request, stream string) (*feed.Format, error) {
	q := r.URL.Query()
	schemas := false
	switch q.Get("schemas") {
	case "", "false", "0":
	case "true", "1":
		schemas = true
	default:
		return nil, apiErr(http.StatusBadRequest, "invalid_schemas", "schemas must be true or false")
	}
	f, err := feed.NewFormat(q.Get("format"), schemas, stream)
	switch {
	case errors.Is(err, feed.ErrSchemas):
		return nil, apiErr(http.StatusBadRequest, "invalid_schemas", err.Error())
	case err != nil:
		return nil, apiErr(http.StatusBadRequest, "invalid_format", err.Error())
	}
	return f, nil
}

type formatKey struct{}

// withFormat carries a request's format to its outbound step.
func withFormat(ctx context.Context, f *feed.Format) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, formatKey{}, f)
}

// formatOf is the format withFormat put in ctx (nil: the default one).
func formatOf(ctx context.Context) *feed.Format {
	f, _ := ctx.Value(formatKey{}).(*feed.Format)
	return f
}
