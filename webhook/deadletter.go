package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/vstream-gateway/vstream-gateway/store"
)

// Dead-letter reasons.
const (
	ReasonMaxAttempts = "max_attempts" // retryable failures until max_attempts
	ReasonPermanent   = "permanent"    // a 4xx that retrying cannot fix
)

// DeadLetter is a batch the webhook gave up on. The cursor moved past it
// so that later batches could flow; replaying it sends the same message
// (same webhook-id and body) again.
type DeadLetter struct {
	Seq            uint64          `json:"seq"`
	ID             string          `json:"id"`
	Events         int             `json:"events"`
	Cursor         string          `json:"cursor"`
	Reason         string          `json:"reason"`
	Attempts       int             `json:"attempts"`
	LastStatus     int             `json:"last_status,omitempty"`
	LastError      string          `json:"last_error"`
	FirstAttemptAt time.Time       `json:"first_attempt_at"`
	FailedAt       time.Time       `json:"failed_at"`
	Replayed       *Replay         `json:"replayed,omitempty"`
	Message        json.RawMessage `json:"message"`
}

// Replay records a successful replay.
type Replay struct {
	At     time.Time `json:"at"`
	Status int       `json:"status"`
}

// ReplayError is a replay the receiver did not accept.
type ReplayError struct {
	Status int // 0 when no response was received
	Msg    string
}

func (e *ReplayError) Error() string { return "receiver did not accept the replay: " + e.Msg }

// appendDeadLetter records a batch given up on, only while lease is held
// (a replica that lost the webhook must not add an entry the new owner
// adds too).
func (s *Service) appendDeadLetter(ctx context.Context, wh *Webhook, b *batch, f *inflight, reason string, lease store.Lease) error {
	dl := &DeadLetter{
		ID: b.id, Events: b.events, Cursor: b.cursor, Reason: reason,
		Attempts: f.Attempts, LastStatus: f.LastStatus, LastError: f.LastError,
		FirstAttemptAt: f.FirstAttemptAt, FailedAt: s.now().UTC(), Message: b.body,
	}
	v, err := json.Marshal(dl)
	if err != nil {
		return err
	}
	if _, err := s.st.AppendFenced(ctx, dlqLog(wh.ID), lease.Name, lease.Token, v); err != nil {
		return fmt.Errorf("dead-letter batch %s: %w", b.id, fenced(err))
	}
	return nil
}

// DeadLetters lists webhook id's dead letters with Seq > after, oldest
// first, up to limit; next is the after value of the following page (0 at
// the end).
func (s *Service) DeadLetters(ctx context.Context, stream, id string, after uint64, limit int) (list []*DeadLetter, next uint64, err error) {
	if _, err := s.get(ctx, stream, id); err != nil {
		return nil, 0, err
	}
	entries, err := s.st.ReadLog(ctx, dlqLog(id), after, limit+1)
	if err != nil {
		return nil, 0, err
	}
	replays, err := s.st.List(ctx, replayNS(id))
	if err != nil {
		return nil, 0, err
	}
	done := make(map[string]*Replay, len(replays))
	for _, r := range replays {
		rp := &Replay{}
		if json.Unmarshal(r.Value, rp) == nil {
			done[r.Key] = rp
		}
	}
	for i, e := range entries {
		if i == limit {
			next = list[len(list)-1].Seq
			break
		}
		dl := &DeadLetter{}
		if err := json.Unmarshal(e.Value, dl); err != nil {
			return nil, 0, fmt.Errorf("dead letter %d of %s: corrupt: %w", e.Seq, id, err)
		}
		dl.Seq = e.Seq
		dl.Replayed = done[seqKey(e.Seq)]
		list = append(list, dl)
	}
	return list, next, nil
}

func seqKey(seq uint64) string { return strconv.FormatUint(seq, 10) }

// deadLetter returns one dead letter.
func (s *Service) deadLetter(ctx context.Context, id string, seq uint64) (*DeadLetter, error) {
	if seq == 0 {
		return nil, ErrDeadLetterNotFound
	}
	entries, err := s.st.ReadLog(ctx, dlqLog(id), seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 || entries[0].Seq != seq {
		return nil, ErrDeadLetterNotFound
	}
	dl := &DeadLetter{}
	if err := json.Unmarshal(entries[0].Value, dl); err != nil {
		return nil, fmt.Errorf("dead letter %d of %s: corrupt: %w", seq, id, err)
	}
	dl.Seq = seq
	return dl, nil
}

// Replay sends dead letter seq of webhook id to the receiver once more,
// now, from this replica: same webhook-id and body (a receiver that did
// process it after all de-duplicates it), a fresh timestamp, signed with
// the current secrets. It arrives after batches that followed it; that is
// the nature of a replay. A 2xx marks the dead letter replayed; anything
// else is a *ReplayError and leaves it as it was.
func (s *Service) Replay(ctx context.Context, stream, id string, seq uint64) (*DeadLetter, error) {
	wh, err := s.get(ctx, stream, id)
	if err != nil {
		return nil, err
	}
	dl, err := s.deadLetter(ctx, id, seq)
	if err != nil {
		return nil, err
	}
	a := post(ctx, s.client, wh, dl.ID, dl.Message, s.now())
	if a.class != classDelivered {
		s.metrics.observeAttempt(id, a, attemptDeadLetter)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ReplayError{Status: a.status, Msg: a.describe()}
	}
	s.metrics.observeAttempt(id, a, attemptSuccess)
	rp := &Replay{At: s.now().UTC(), Status: a.status}
	v, _ := json.Marshal(rp)
	if err := s.st.Put(ctx, replayNS(id), seqKey(seq), v); err != nil {
		return nil, err
	}
	s.log.Info("webhook dead letter replayed", "webhook", id, "seq", seq, "message", dl.ID, "status", a.status)
	dl.Replayed = rp
	return dl, nil
}

// PurgeDeadLetters empties webhook id's dead-letter list.
func (s *Service) PurgeDeadLetters(ctx context.Context, stream, id string) error {
	if _, err := s.get(ctx, stream, id); err != nil {
		return err
	}
	if err := s.st.DeleteLog(ctx, dlqLog(id)); err != nil {
		return err
	}
	recs, err := s.st.List(ctx, replayNS(id))
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := s.st.Delete(ctx, replayNS(id), r.Key); err != nil {
			return err
		}
	}
	return nil
}
