package server

import (
	"context"

	"github.com/go-chi/chi/v5"

	"github.com/vstream-gateway/vstream-gateway/handlers"
	"github.com/vstream-gateway/vstream-gateway/metrics"
	"github.com/vstream-gateway/vstream-gateway/webhook"
)

// webhooks is the gateway's webhook side: the admin API, the service it
// drives, and this replica's supervisor, which delivers the webhooks whose
// leases it holds.
type webhooks struct {
	api  *handlers.WebhookAPI
	sup  *webhook.Supervisor
	stop func() // ends the supervisor and waits for it (nil until started)
}

// newWebhooks builds the webhook service on the server's store, streams
// and hub (webhooks open their subscriptions with hub.Open).
func (s *Server) newWebhooks(cfg *Config) error {
	if err := webhook.Register(metrics.Registry); err != nil {
		return err
	}
	svc := webhook.NewService(s.store, s.streams, s.hub,
		webhook.WithLogger(s.log),
		webhook.WithAllowPrivate(cfg.AllowPrivateWebhooks),
		webhook.WithBackoff(webhook.Backoff{Initial: cfg.WebhookRetryMin, Max: cfg.WebhookRetryMax, MaxRetryAfter: webhook.DefaultBackoff().MaxRetryAfter}))
	if cfg.AllowPrivateWebhooks {
		s.log.Warn("webhooks may reach loopback, private and link-local addresses (--allow-private-webhooks)")
	}
	s.wh.api = &handlers.WebhookAPI{API: s.api, Service: svc}
	// A deleted stream takes its webhooks with it.
	s.api.StreamDeleted = svc.DeleteStream
	s.api.Webhooks = func(ctx context.Context, stream string) (map[string]bool, error) {
		list, err := svc.List(ctx, stream)
		if err != nil {
			return nil, err
		}
		out := make(map[string]bool, len(list))
		for _, v := range list {
			out[v.Subscriber] = v.Owner != "" && v.State == webhook.StateActive
		}
		return out, nil
	}
	// The console's webhook charts: this replica's numbers, sampled with
	// the streams' (GET /v1/stats).
	s.api.History.SetWebhooks(webhook.Live)
	s.wh.sup = svc.NewSupervisor(webhook.WithLeaseTTL(cfg.WebhookLeaseTTL), webhook.WithHolder(s.replica))
	return nil
}

// startWebhooks runs the supervisor until stopWebhooks.
func (s *Server) startWebhooks(ctx context.Context) {
	if s.wh.sup == nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.wh.sup.Run(ctx) }()
	s.wh.stop = func() { cancel(); <-done }
}

// stopWebhooks stops delivering and releases the leases (so that another
// replica takes over at once). It runs before the store closes.
func (s *Server) stopWebhooks() {
	if s.wh.stop != nil {
		s.wh.stop()
		s.wh.stop = nil
	}
}

// webhookRoutes mounts /v1/streams/{stream}/webhooks. Every webhook
// endpoint is admin: webhooks carry URLs and secrets.
func (s *Server) webhookRoutes(r chi.Router) {
	a := s.wh.api
	if a == nil {
		// A server assembled without webhooks (tests) still routes them.
		a = &handlers.WebhookAPI{API: s.api}
	}
	r.Post("/", a.CreateWebhook)
	r.Get("/", a.ListWebhooks)
	r.Route("/{webhook}", func(r chi.Router) {
		r.Get("/", a.GetWebhook)
		r.Delete("/", a.DeleteWebhook)
		r.Post("/pause", a.PauseWebhook)
		r.Post("/resume", a.ResumeWebhook)
		r.Post("/rotate-secret", a.RotateWebhookSecret)
		r.Get("/dead-letters", a.ListDeadLetters)
		r.Delete("/dead-letters", a.PurgeDeadLetters)
		r.Post("/dead-letters/{seq}/replay", a.ReplayDeadLetter)
	})
}
