package handlers

import "context"

// untilShutdown returns ctx cancelled also when the gateway begins to shut
// down (API.Shutdown ends), so that a stream ends while its client can
// still be told where to resume.
func (a *API) untilShutdown(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(a.shutdown(), cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// shutdown is API.Shutdown, or a context that never ends.
func (a *API) shutdown() context.Context {
	if a.Shutdown == nil {
		return context.Background()
	}
	return a.Shutdown
}
