package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// writer inserts rows at a fixed rate through vtgate's MySQL port, one row
// per transaction (autocommit), from one or more connections.
type writer struct {
	db    *sql.DB
	run   string
	table string
	rate  float64
	conns int
	log   *slog.Logger

	wl   *writeLog
	n    atomic.Int64 // sequence numbers issued
	errs atomic.Int64
	// slip is the largest delay between a row's scheduled time and the
	// moment a connection sent it: a writer that cannot keep the rate
	// shows it here rather than silently writing less.
	slip atomic.Int64
}

func openDB(addr, user, keyspace string, conns int) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = user, "tcp", addr, keyspace
	cfg.InterpolateParams = true
	cfg.Timeout = 5 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// capacity is how many rows a run of d at rate r writes.
func capacity(rate float64, d time.Duration) int {
	return max(1, int(math.Ceil(rate*d.Seconds())))
}

// run writes until ctx ends or the log is full. Rows are scheduled on a
// clock (row i is due at start + i/rate) checked every millisecond or
// every row, whichever is longer, so the rate holds at thousands of rows
// per second where a ticker per row would not.
func (w *writer) runFor(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	jobs := make(chan int64, w.conns)
	var wg sync.WaitGroup
	stmt := fmt.Sprintf("insert into %s(email) values (?)", w.table)
	for range w.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range jobs {
				sent := time.Now()
				w.wl.sent[seq] = sent.UnixNano()
				_, err := w.db.ExecContext(context.Background(), stmt, emailFor(w.run, seq, sent.UnixNano()))
				w.wl.done[seq] = time.Now().UnixNano()
				if err != nil {
					w.errs.Add(1)
					w.log.Warn("insert failed", "seq", seq, "err", err)
					continue
				}
				w.wl.ok[seq] = true
			}
		}()
	}
	tick := time.Duration(float64(time.Second) / w.rate)
	tick = max(tick, time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	start := time.Now()
	limit := int64(len(w.wl.sent))
loop:
	for {
		due := min(int64(time.Since(start).Seconds()*w.rate)+1, limit)
		for seq := w.n.Load(); seq < due; seq++ {
			scheduled := start.Add(time.Duration(float64(seq) / w.rate * float64(time.Second)))
			select {
			case jobs <- seq:
			case <-ctx.Done():
				break loop
			}
			if s := int64(time.Since(scheduled)); s > w.slip.Load() {
				w.slip.Store(s)
			}
			w.n.Store(seq + 1)
		}
		if due >= limit {
			break
		}
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		}
	}
	close(jobs)
	wg.Wait()
}

// committed counts the rows whose INSERT succeeded.
func (w *writer) committed() int64 {
	var n int64
	for i := range w.n.Load() {
		if w.wl.ok[i] {
			n++
		}
	}
	return n
}
