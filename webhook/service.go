package webhook

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"

	"github.com/vstream-gateway/vstream-gateway/feed"
	"github.com/vstream-gateway/vstream-gateway/hub"
	"github.com/vstream-gateway/vstream-gateway/internal/wait"
	"github.com/vstream-gateway/vstream-gateway/position"
	"github.com/vstream-gateway/vstream-gateway/store"
	"github.com/vstream-gateway/vstream-gateway/streams"
)

// ErrUpstream: the stream's current position could not be read when a
// webhook was created (vtgate unreachable).
var ErrUpstream = errors.New("webhook: cannot read the stream's current position")

// StreamLookup finds stream definitions; *streams.Registry is one.
type StreamLookup interface {
	Get(ctx context.Context, name string) (*streams.Definition, error)
}

// Tokens converts positions to cursor tokens of a stream and back;
// *hub.Hub is the production one.
type Tokens interface {
	Token(ctx context.Context, def *streams.Definition, pos *binlogdatapb.VGtid) (string, error)
	Position(ctx context.Context, def *streams.Definition, token string) (*binlogdatapb.VGtid, error)
}

// Service holds what the admin API and the deliverers share.
type Service struct {
	st      store.Store
	repo    repo
	streams StreamLookup
	cursors *hub.Cursors
	tokens  Tokens
	src     Source
	policy  AddressPolicy
	client  *http.Client
	backoff Backoff
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
	// sleep waits between attempts; tests replace it to observe delays.
	sleep func(ctx context.Context, d time.Duration) error
	// idleAck is how often a webhook whose filter drops every row still
	// stores its moving position, so a restart does not re-read it all.
	idleAck time.Duration
	// pinWait bounds how long Create waits for the stream's position.
	pinWait time.Duration
}

// Option configures a Service.
type Option func(*Service)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithAllowPrivate lets webhooks reach loopback, private and link-local
// addresses (for development and tests; never on a shared network).
func WithAllowPrivate(allow bool) Option { return func(s *Service) { s.policy.AllowPrivate = allow } }

// WithResolver sets the resolver used to check URL hosts at creation.
func WithResolver(r Resolver) Option { return func(s *Service) { s.policy.Resolver = r } }

// WithBackoff sets the retry schedule.
func WithBackoff(b Backoff) Option { return func(s *Service) { s.backoff = b } }

// WithSource replaces hub.Open as the source of transactions (tests).
func WithSource(src Source) Option { return func(s *Service) { s.src = src } }

// WithTokens replaces the hub's cursor token codec (tests).
func WithTokens(t Tokens) Option { return func(s *Service) { s.tokens = t } }

// WithCursors replaces the hub's subscriber cursors (tests).
func WithCursors(c *hub.Cursors) Option { return func(s *Service) { s.cursors = c } }

// WithMetrics sets the collectors (default: the package's, see Register).
func WithMetrics(m *Metrics) Option { return func(s *Service) { s.metrics = m } }

// WithIdleAck sets how often an idle webhook stores its moving position.
func WithIdleAck(d time.Duration) Option { return func(s *Service) { s.idleAck = d } }

// NewService returns the webhook service over st. Transactions come from
// h (hub.Open), cursors and tokens are h's. h may be nil when the options
// provide a source, tokens and cursors (tests).
func NewService(st store.Store, reg StreamLookup, h *hub.Hub, opts ...Option) *Service {
	s := &Service{
		st: st, repo: repo{st: st}, streams: reg,
		backoff: DefaultBackoff(), metrics: defaultMetrics, log: slog.Default(),
		now: time.Now, sleep: wait.Sleep, idleAck: 5 * time.Second, pinWait: 10 * time.Second,
	}
	if h != nil {
		s.cursors, s.tokens, s.src = h.Cursors(), h, HubSource{Hub: h}
	}
	for _, o := range opts {
		o(s)
	}
	s.client = newHTTPClient(s.policy)
	return s
}

// View is a webhook as the API shows it: settings, state and progress,
// never its secrets (Secret is set only in the answers to create and
// rotate, the one time the caller sees it).
type View struct {
	ID             string    `json:"id"`
	Stream         string    `json:"stream"`
	URL            string    `json:"url"`
	State          State     `json:"state"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	BatchMaxEvents int       `json:"batch_max_events"`
	BatchMaxBytes  int       `json:"batch_max_bytes"`
	BatchMaxWait   Duration  `json:"batch_max_wait"`
	MaxAttempts    int       `json:"max_attempts"`
	Timeout        Duration  `json:"timeout"`
	Format         string    `json:"format"`
	Schemas        bool      `json:"schemas,omitempty"`
	Subscriber     string    `json:"subscriber"`
	Cursor         string    `json:"cursor,omitempty"`
	AckedAt        time.Time `json:"acked_at,omitzero"`
	Owner          string    `json:"owner,omitempty"`
	Pending        *Pending  `json:"pending,omitempty"`
	DeadLetters    int       `json:"dead_letters"`
	// PreviousSecretsExpireAt is when the last rotated-out secret stops
	// signing (absent when only one secret signs).
	PreviousSecretsExpireAt time.Time `json:"previous_secrets_expire_at,omitzero"`
	CreatedAt               time.Time `json:"created_at"`
	UpdatedAt               time.Time `json:"updated_at"`
	Secret                  string    `json:"secret,omitempty"`
}

// Pending is the batch being delivered, while it is failing.
type Pending struct {
	ID             string    `json:"id"`
	Events         int       `json:"events"`
	Attempts       int       `json:"attempts"`
	FirstAttemptAt time.Time `json:"first_attempt_at,omitzero"`
	LastAttemptAt  time.Time `json:"last_attempt_at,omitzero"`
	LastStatus     int       `json:"last_status,omitempty"`
	LastError      string    `json:"last_error,omitempty"`
	NextAttemptAt  time.Time `json:"next_attempt_at,omitzero"`
}

// get returns webhook id if it belongs to stream.
func (s *Service) get(ctx context.Context, stream, id string) (*Webhook, error) {
	w, err := s.repo.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if w.Stream != stream {
		return nil, ErrNotFound
	}
	return w, nil
}

// Create validates req, checks where its URL points, fixes the webhook's
// starting position and stores it.
//
// The start is pinned now — the cursor given, or the stream's current
// position — so that the webhook receives every change committed after it
// was created, however long it takes a replica to pick it up. Streams that
// start with a snapshot are not pinned: their webhooks start with the
// snapshot.
func (s *Service) Create(ctx context.Context, def *streams.Definition, req *CreateRequest) (*View, error) {
	w, err := req.settings()
	if err != nil {
		return nil, err
	}
	if err := s.policy.CheckURL(ctx, w.URL); err != nil {
		return nil, err
	}
	w.ID = newID()
	w.Stream = def.Name
	secret := req.Secret
	if secret == "" {
		secret = GenerateSecret()
	}
	w.Secrets = []StoredSecret{{Secret: secret}}
	w.CreatedAt = s.now().UTC().Truncate(time.Millisecond)
	w.UpdatedAt = w.CreatedAt

	var pos *binlogdatapb.VGtid
	switch {
	case req.Cursor != "":
		if pos, err = s.tokens.Position(ctx, def, req.Cursor); err != nil {
			return nil, &hub.CursorError{Err: err}
		}
	case def.Start != streams.StartSnapshot:
		if pos, err = s.pin(ctx, def); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUpstream, err)
		}
	}
	if pos != nil {
		// A plain write: the webhook does not exist yet, so no replica can
		// hold its lease.
		if _, err := s.cursors.Ack(ctx, def.Name, w.Subscriber(), pos); err != nil {
			return nil, err
		}
	}
	if err := s.repo.create(ctx, w); err != nil {
		return nil, err
	}
	s.log.Info("webhook created", "webhook", w.ID, "stream", w.Stream, "host", hostOf(w.URL))
	v, err := s.view(ctx, w)
	if err != nil {
		return nil, err
	}
	v.Secret = secret
	return v, nil
}

// pin reads the stream's current position: vtgate answers a VStream from
// "current" with the concrete position at once.
func (s *Service) pin(ctx context.Context, def *streams.Definition) (*binlogdatapb.VGtid, error) {
	ctx, cancel := context.WithTimeout(ctx, s.pinWait)
	defer cancel()
	f, err := s.src.Open(ctx, def, hub.From{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for {
		d, err := f.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !d.Heartbeat && position.Of(d.VGtid).Concrete() {
			return d.VGtid, nil
		}
	}
}

// Get returns webhook id of stream.
func (s *Service) Get(ctx context.Context, stream, id string) (*View, error) {
	w, err := s.get(ctx, stream, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, w)
}

// List returns stream's webhooks, oldest first.
func (s *Service) List(ctx context.Context, stream string) ([]*View, error) {
	ws, err := s.repo.list(ctx, stream)
	if err != nil {
		return nil, err
	}
	out := make([]*View, 0, len(ws))
	for _, w := range ws {
		v, err := s.view(ctx, w)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// view assembles what the API shows from the definition, the status, the
// stored cursor, the lease and the in-flight record.
func (s *Service) view(ctx context.Context, w *Webhook) (*View, error) {
	v := &View{
		ID: w.ID, Stream: w.Stream, URL: w.URL, State: StateActive,
		BatchMaxEvents: w.BatchMaxEvents, BatchMaxBytes: w.MaxBytes(), BatchMaxWait: w.BatchMaxWait,
		MaxAttempts: w.MaxAttempts, Timeout: w.Timeout, Subscriber: w.Subscriber(),
		Format: cmp.Or(w.Format, feed.FormatDefault), Schemas: w.Schemas,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
	now := s.now()
	for _, sec := range w.Secrets[min(1, len(w.Secrets)):] {
		if sec.ExpiresAt.After(now) && sec.ExpiresAt.After(v.PreviousSecretsExpireAt) {
			v.PreviousSecretsExpireAt = sec.ExpiresAt
		}
	}
	st, err := s.repo.status(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	switch {
	case w.Paused:
		v.State = StatePaused
	case st.Disabled:
		v.State, v.DisabledReason = StateDisabled, st.DisabledReason
	}
	var stored *binlogdatapb.VGtid
	if cs, err := s.cursors.Get(ctx, w.Stream, w.Subscriber()); err == nil {
		stored, v.AckedAt = cs.VGtid, cs.AckedAt
		// The token needs the stream's definition (tokens are bound to
		// it); a webhook whose stream was deleted shows no cursor.
		if def, err := s.streams.Get(ctx, w.Stream); err == nil {
			if v.Cursor, err = s.tokens.Token(ctx, def, cs.VGtid); err != nil {
				return nil, err
			}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if l, err := s.st.GetLease(ctx, leaseName(w.ID)); err == nil && l.Expires.After(now) {
		v.Owner = l.Holder
	}
	if f, err := s.repo.inflight(ctx, w.ID); err != nil {
		return nil, err
	} else if f != nil && f.Attempts > 0 && f.LastError != "" {
		if start, err := position.Unmarshal(f.Start); err == nil && start.Identical(position.Of(stored)) {
			v.Pending = &Pending{
				ID: f.ID, Events: f.Events, Attempts: f.Attempts,
				FirstAttemptAt: f.FirstAttemptAt, LastAttemptAt: f.LastAttemptAt,
				LastStatus: f.LastStatus, LastError: f.LastError, NextAttemptAt: f.NextAttemptAt,
			}
		}
	}
	n, err := s.st.LogLen(ctx, dlqLog(w.ID))
	if err != nil {
		return nil, err
	}
	v.DeadLetters = n
	return v, nil
}

// Delete removes webhook id, its cursor, dead letters and status, and
// revokes its lease so that the replica delivering it stops at once (its
// next fenced write fails).
func (s *Service) Delete(ctx context.Context, stream, id string) error {
	w, err := s.get(ctx, stream, id)
	if err != nil {
		return err
	}
	if err := s.st.Delete(ctx, nsWebhooks, id); err != nil {
		return err
	}
	s.revoke(ctx, id)
	err = errors.Join(s.repo.forget(ctx, id), s.cursors.Delete(ctx, w.Stream, w.Subscriber()))
	s.metrics.forget(id)
	s.log.Info("webhook deleted", "webhook", id, "stream", stream)
	return err
}

// DeleteStream deletes every webhook of stream, with its dead letters and
// cursor: called when the stream itself is deleted, so that its deliverers
// stop and a stream created later under the same name starts with none.
func (s *Service) DeleteStream(ctx context.Context, stream string) error {
	list, err := s.repo.list(ctx, stream)
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range list {
		if err := s.Delete(ctx, stream, w.ID); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, fmt.Errorf("webhook %s: %w", w.ID, err))
		}
	}
	return errors.Join(errs...)
}

// revoke releases webhook id's lease whoever holds it: the holder's
// fenced writes fail from now on, and it stops.
func (s *Service) revoke(ctx context.Context, id string) {
	l, err := s.st.GetLease(ctx, leaseName(id))
	if err != nil {
		return
	}
	if err := s.st.ReleaseLease(ctx, l); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		s.log.Warn("webhook lease not revoked", "webhook", id, "err", err)
	}
}

// Pause stops deliveries of webhook id until Resume. A batch in flight may
// still reach the receiver; it is sent again, under the same webhook-id,
// after Resume.
func (s *Service) Pause(ctx context.Context, stream, id string) (*View, error) {
	w, err := s.get(ctx, stream, id)
	if err != nil {
		return nil, err
	}
	if !w.Paused {
		w.Paused, w.UpdatedAt = true, s.now().UTC().Truncate(time.Millisecond)
		if err := s.repo.put(ctx, w); err != nil {
			return nil, err
		}
		s.revoke(ctx, id)
		s.log.Info("webhook paused", "webhook", id)
	}
	return s.view(ctx, w)
}

// Resume restarts deliveries of a paused webhook, or of one disabled by a
// 410, from its stored cursor.
func (s *Service) Resume(ctx context.Context, stream, id string) (*View, error) {
	w, err := s.get(ctx, stream, id)
	if err != nil {
		return nil, err
	}
	if w.Paused {
		w.Paused, w.UpdatedAt = false, s.now().UTC().Truncate(time.Millisecond)
		if err := s.repo.put(ctx, w); err != nil {
			return nil, err
		}
	}
	if err := s.st.Delete(ctx, nsStatus, id); err != nil {
		return nil, err
	}
	s.log.Info("webhook resumed", "webhook", id)
	return s.view(ctx, w)
}

// maxSecrets bounds how many rotated-out secrets keep signing at once.
const maxSecrets = 4

// RotateSecret makes a new secret (req.Secret, or a generated one) the
// current one. The secrets it replaces keep signing alongside it for the
// grace period (default 24h; 0 retires them at once), so every request in
// the meantime carries one signature per secret and receivers can switch
// whenever they like.
func (s *Service) RotateSecret(ctx context.Context, stream, id string, req *RotateRequest) (*View, error) {
	secret := req.Secret
	if secret == "" {
		secret = GenerateSecret()
	} else if _, err := ParseSecret(secret); err != nil {
		return nil, invalid("secret", "%v", err)
	}
	grace := DefaultSecretGrace
	if req.Grace != nil {
		if grace = req.Grace.D(); grace < 0 || grace > MaxSecretGrace {
			return nil, invalid("grace", "must be between 0s and %s", MaxSecretGrace)
		}
	}
	w, err := s.get(ctx, stream, id)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	keep := []StoredSecret{{Secret: secret}}
	if grace > 0 {
		until := now.Add(grace)
		for _, old := range w.Secrets {
			if old.Secret == secret || (!old.ExpiresAt.IsZero() && !old.ExpiresAt.After(now)) {
				continue
			}
			exp := until
			if !old.ExpiresAt.IsZero() && old.ExpiresAt.Before(exp) {
				exp = old.ExpiresAt
			}
			if len(keep) < maxSecrets {
				keep = append(keep, StoredSecret{Secret: old.Secret, ExpiresAt: exp})
			}
		}
	}
	w.Secrets, w.UpdatedAt = keep, now
	if err := s.repo.put(ctx, w); err != nil {
		return nil, err
	}
	s.log.Info("webhook secret rotated", "webhook", id, "grace", grace)
	v, err := s.view(ctx, w)
	if err != nil {
		return nil, err
	}
	v.Secret = secret
	return v, nil
}

// newID returns "wh_" and 16 random base32 characters.
func newID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return "wh_" + strings.ToLower(idEncoding.EncodeToString(b))
}

// hostOf returns a URL's host for logs (never the path or query, which
// may carry tokens).
func hostOf(raw string) string {
	u, err := parseURL(raw)
	if err != nil {
		return ""
	}
	return u.Host
}
