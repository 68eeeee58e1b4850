package handlers

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/vstream-gateway/vstream-gateway/auth"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// scopeOf is the effective table scope of p on def: the stream's named
// tables the token may read, and for a stream with a /regex/ rule (whose
// tables only vttablet lists) the token's globs themselves. Table names,
// not keyspace.table: a stream that follows its tables to another keyspace
// (MoveTables) keeps its subscribers' scopes. Nil without a principal
// (handlers used on their own, in tests): nothing is checked then.
func scopeOf(def *streams.Definition, p *auth.Principal) *hub.Scope {
	if p == nil {
		return nil
	}
	f := p.TableFilter()
	names := def.TableNames()
	var tables []string
	for _, t := range names {
		if f.Allows(def.Keyspace, t) {
			tables = append(tables, t)
		}
	}
	var globs []string
	if len(names) < len(def.Tables)+len(def.Rules) {
		globs = p.Tables
		if f.AllowsAll() {
			globs = []string{"*"}
		}
	}
	return hub.NewScope(tables, globs)
}

// checkScope refuses a request for a named subscriber bound to another
// table scope than the request's token has (409 subscriber_scope_mismatch);
// a subscriber stored without one adopts it. It reports whether the
// subscriber exists. A store that does not answer is returned as it is:
// the readers let it pass (every ack is checked once the store answers, and
// no cursor moves before), the ack path retries.
func (a *API) checkScope(ctx context.Context, def *streams.Definition, sub string) (bool, error) {
	scope := scopeOf(def, auth.FromContext(ctx))
	if sub == "" || scope == nil {
		return true, nil
	}
	found, err := a.Cursors.CheckScope(ctx, def.Name, sub, scope)
	var me *hub.ScopeMismatchError
	if errors.As(err, &me) {
		return found, apiErr(http.StatusConflict, "subscriber_scope_mismatch", me.Error())
	}
	return found, err
}

// scopeLookup bounds a reader's scope check. The reader's own opening
// asks the store again (and answers 503 itself when it must): waiting the
// store's whole timeout here as well doubled a new named subscriber's
// wait for its 503 during an outage.
const scopeLookup = time.Second

// checkReaderScope is checkScope for a reader being opened: a store outage
// does not keep it from opening (see checkScope).
func (a *API) checkReaderScope(ctx context.Context, def *streams.Definition, sub string) error {
	lctx, cancel := context.WithTimeout(ctx, scopeLookup)
	defer cancel()
	_, err := a.checkScope(lctx, def, sub)
	if errors.Is(err, store.ErrUnavailable) || ctx.Err() == nil && lctx.Err() != nil {
		return nil
	}
	return err
}
