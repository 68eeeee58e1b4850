package handlers

import "context"

// untilShutdown returns ctx cancelled also when the gateway begins to shut
// down (API.Shutdown closed), so that a stream ends while its client can
// still be told where to resume.
func (a *API) untilShutdown(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if a.Shutdown != nil {
		go func() {
			select {
			case <-a.Shutdown:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}
