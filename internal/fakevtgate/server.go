// Package fakevtgate is a scriptable vtgate gRPC server for unit tests.
//
// It serves the real vtgateservice API on a loopback socket, so the
// gateway's source.Dial talks to it exactly as to vtgate. Tests script what
// each VStream call receives (event batches, then EOF, an error, or a stream
// that stays open) and can produce on demand what a real cluster cannot: a
// transaction cut off by UNAVAILABLE, a shard deleted under a cursor, a
// tablet search that never ends. Execute answers from canned results.
package fakevtgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"vitess.io/vitess/go/sqltypes"
	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	vtgatepb "vitess.io/vitess/go/vt/proto/vtgate"
	vtgateservicepb "vitess.io/vitess/go/vt/proto/vtgateservice"
	vtrpcpb "vitess.io/vitess/go/vt/proto/vtrpc"
	"vitess.io/vitess/go/vt/vterrors"
)

// Script is the answer to one VStream call.
type Script struct {
	// Batches are sent in order, each as one VStreamResponse (one Recv on
	// the client).
	Batches [][]*binlogdatapb.VEvent
	// Err ends the stream after the batches; nil or io.EOF ends it cleanly
	// (the client reads io.EOF). Use vterrors to choose the gRPC code, as
	// vtgate does.
	Err error
	// Open keeps the stream open after the batches until the client cancels
	// it or the test continues it with Call.Answer. An Open script with no
	// batches is vtgate searching for a tablet.
	Open bool
}

// Call is one VStream call the server received.
type Call struct {
	Req   *vtgatepb.VStreamRequest
	steps chan Script
	done  chan struct{}
}

// Answer continues a call that is open (answered with an Open script, or
// not answered yet because no script was queued): batches are sent, and
// the call stays open or ends as next says.
func (c *Call) Answer(t testing.TB, next Script) {
	t.Helper()
	select {
	case c.steps <- next:
	case <-c.done:
		t.Fatalf("fakevtgate: call from %v already ended", c.Req.Vgtid)
	}
}

// Done is closed when the server has finished the call: its script ended
// or the client cancelled the stream.
func (c *Call) Done() <-chan struct{} { return c.done }

// TryAnswer is Answer for a call that may end meanwhile (a client that
// cancels it): it reports whether the call took next.
func (c *Call) TryAnswer(next Script) bool {
	select {
	case c.steps <- next:
		return true
	case <-c.done:
		return false
	}
}

// Timeout bounds Server.Call: a call that never comes fails the test.
var Timeout = 5 * time.Second

// Server is the fake vtgate.
type Server struct {
	vtgateservicepb.UnimplementedVitessServer

	Addr  string // to dial
	srv   *grpc.Server
	serve chan struct{} // closed when Serve has returned

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every new call or script
	scripts []Script
	calls   []*Call
	results map[string]*sqltypes.Result // by normalized SQL
	errs    map[string]error            // by normalized SQL, before results
	queries []Query
	topo    map[string][2][]string // keyspace -> serving, readable shards
}

// Query is one Execute the server received.
type Query struct {
	Target string // the session's target, e.g. "customer@primary"
	SQL    string
}

// New starts a fake vtgate on 127.0.0.1 and stops it when the test ends.
// It answers "select 1"; everything else needs SetResult.
func New(t testing.TB) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakevtgate: listen: %v", err)
	}
	s := &Server{
		Addr:    lis.Addr().String(),
		changed: make(chan struct{}),
		results: map[string]*sqltypes.Result{},
	}
	s.SetResult("select 1", sqltypes.MakeTestResult(sqltypes.MakeTestFields("1", "int64"), "1"))
	s.serveOn(lis)
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) serveOn(lis net.Listener) {
	srv, done := grpc.NewServer(), make(chan struct{})
	vtgateservicepb.RegisterVitessServer(srv, s)
	s.mu.Lock()
	s.srv, s.serve = srv, done
	s.mu.Unlock()
	go func() { defer close(done); _ = srv.Serve(lis) }()
}

// Stop ends every stream and waits for the server to exit. Safe to call
// twice, and after Down.
func (s *Server) Stop() {
	s.mu.Lock()
	srv, done := s.srv, s.serve
	s.mu.Unlock()
	srv.Stop()
	<-done
}

// Down stops the server as a vtgate whose process exits: open streams end
// (the client reads UNAVAILABLE) and connections are refused until Up.
// Scripts and results stay.
func (s *Server) Down() { s.Stop() }

// Up serves again on the same address after Down, as a restarted vtgate.
func (s *Server) Up(t testing.TB) {
	t.Helper()
	lis, err := net.Listen("tcp", s.Addr)
	if err != nil {
		t.Fatalf("fakevtgate: listen again on %s: %v", s.Addr, err)
	}
	s.serveOn(lis)
}

// Push queues scripts: each answers one VStream call, in arrival order. A
// call with no script waits for one, for Call.Answer, or for the client to
// give up.
func (s *Server) Push(scripts ...Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts = append(s.scripts, scripts...)
	s.notifyLocked()
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Calls returns how many VStream calls have arrived so far.
func (s *Server) Calls() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.calls) }

// Call waits for the i-th VStream call (0-based) and returns it.
func (s *Server) Call(t testing.TB, i int) *Call {
	t.Helper()
	deadline := time.After(Timeout)
	for {
		s.mu.Lock()
		calls, changed := s.calls, s.changed
		s.mu.Unlock()
		if i < len(calls) {
			return calls[i]
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("fakevtgate: VStream call %d did not arrive within %v (%d arrived)", i, Timeout, len(calls))
		}
	}
}

// WaitCall waits for the i-th VStream call (0-based) until ctx ends: for a
// test that serves every call as it comes, for as long as it runs (Call
// fails the test after Timeout).
func (s *Server) WaitCall(ctx context.Context, i int) (*Call, error) {
	for {
		s.mu.Lock()
		calls, changed := s.calls, s.changed
		s.mu.Unlock()
		if i < len(calls) {
			return calls[i], nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// VStream implements vtgateservice: it answers with the next script.
func (s *Server) VStream(req *vtgatepb.VStreamRequest, stream vtgateservicepb.Vitess_VStreamServer) error {
	ctx := stream.Context()
	c := &Call{Req: req, steps: make(chan Script), done: make(chan struct{})}
	defer close(c.done)
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.notifyLocked()
	s.mu.Unlock()

	for first := true; ; first = false {
		script, ok := s.nextScript(ctx, c, first)
		if !ok {
			// The client went away: report what vtgate reports then.
			return status.FromContextError(ctx.Err()).Err()
		}
		for _, b := range script.Batches {
			if err := stream.Send(&vtgatepb.VStreamResponse{Events: b}); err != nil {
				return err
			}
		}
		if !script.Open {
			if script.Err == nil || errors.Is(script.Err, io.EOF) {
				return nil
			}
			return vterrors.ToGRPC(script.Err)
		}
	}
}

// nextScript returns what to do next on call c: the first step is the
// next queued script or c's first Answer, later steps only c's Answers.
func (s *Server) nextScript(ctx context.Context, c *Call, first bool) (Script, bool) {
	for {
		s.mu.Lock()
		if first && len(s.scripts) > 0 {
			sc := s.scripts[0]
			s.scripts = s.scripts[1:]
			s.mu.Unlock()
			return sc, true
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case sc := <-c.steps:
			return sc, true
		case <-ctx.Done():
			return Script{}, false
		}
	}
}

// SetResult sets the answer to a query (compared case-insensitively, with
// surrounding space ignored). Queries without one fail.
func (s *Server) SetResult(sql string, r *sqltypes.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[normalize(sql)] = r
}

// SetError makes a query fail with err, reported in the response as vtgate
// reports query errors (use vterrors to choose the code); nil clears it.
func (s *Server) SetError(sql string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs = map[string]error{}
	}
	if err == nil {
		delete(s.errs, normalize(sql))
		return
	}
	s.errs[normalize(sql)] = err
}

// Queries returns the Execute calls received so far.
func (s *Server) Queries() []Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Query(nil), s.queries...)
}

func normalize(sql string) string { return strings.ToLower(strings.TrimSpace(sql)) }

// Execute implements vtgateservice. Like vtgate it reports query errors in
// the response, not as RPC errors.
func (s *Server) Execute(_ context.Context, req *vtgatepb.ExecuteRequest) (*vtgatepb.ExecuteResponse, error) {
	sql := normalize(req.GetQuery().GetSql())
	s.mu.Lock()
	s.queries = append(s.queries, Query{Target: req.GetSession().GetTargetString(), SQL: sql})
	r, ok := s.results[sql]
	qerr := s.errs[sql]
	s.mu.Unlock()
	resp := &vtgatepb.ExecuteResponse{Session: req.Session}
	switch {
	case qerr != nil:
		resp.Error = vterrors.ToVTRPC(qerr)
	case !ok:
		resp.Error = vterrors.ToVTRPC(vterrors.Errorf(vtrpcpb.Code_INVALID_ARGUMENT, "fakevtgate: no result for %q", sql))
	default:
		resp.Result = sqltypes.ResultToProto3(r)
	}
	return resp, nil
}

// SetTopology answers SHOW VITESS_SHARDS and SHOW VITESS_TABLETS for one
// keyspace (other keyspaces keep theirs): serving shards are in the
// serving graph with a primary; readable shards (resharded away, not yet
// deleted) only have a primary. Shards in neither are deleted.
func (s *Server) SetTopology(keyspace string, serving, readable []string) {
	s.mu.Lock()
	if s.topo == nil {
		s.topo = map[string][2][]string{}
	}
	s.topo[keyspace] = [2][]string{serving, readable}
	keyspaces := make([]string, 0, len(s.topo))
	for k := range s.topo {
		keyspaces = append(keyspaces, k)
	}
	topo := maps.Clone(s.topo)
	s.mu.Unlock()
	sort.Strings(keyspaces)
	shards := sqltypes.MakeTestResult(sqltypes.MakeTestFields("Shards", "varchar"))
	tablets := sqltypes.MakeTestResult(sqltypes.MakeTestFields(
		"Cell|Keyspace|Shard|TabletType|State|Alias|Hostname|PrimaryTermStartTime",
		"varchar|varchar|varchar|varchar|varchar|varchar|varchar|varchar"))
	uid := 100
	for _, ks := range keyspaces {
		serving, readable := topo[ks][0], topo[ks][1]
		for i, sh := range append(append([]string{}, serving...), readable...) {
			if i < len(serving) {
				shards.Rows = append(shards.Rows, []sqltypes.Value{sqltypes.NewVarChar(ks + "/" + sh)})
			}
			tablets.Rows = append(tablets.Rows, sqltypes.MakeTestResult(tablets.Fields, fmt.Sprintf(
				"zone1|%s|%s|PRIMARY|SERVING|zone1-%010d|localhost|2024-01-01T00:00:00Z", ks, sh, uid)).Rows...)
			uid++
		}
	}
	s.SetResult("show vitess_shards", shards)
	s.SetResult("show vitess_tablets", tablets)
}

// SetCreateTable answers SHOW CREATE TABLE for table.
func (s *Server) SetCreateTable(table, ddl string) {
	s.SetResult("show create table `"+table+"`", sqltypes.MakeTestResult(
		sqltypes.MakeTestFields("Table|Create Table", "varchar|varchar"), table+"|"+ddl))
}

// Tablet is one row of SHOW VITESS_TABLETS.
type Tablet struct {
	Keyspace, Shard string
	// Type is the tablet type vtgate's health check reports (PRIMARY when
	// empty); State SERVING when empty.
	Type, State string
	Alias       string
	// TermStart is the primary term start (whole seconds, UTC, as vtgate
	// prints it); zero prints as empty.
	TermStart time.Time
}

// SetTablets answers SHOW VITESS_TABLETS with tablets, replacing what
// SetTopology set: a test changes a shard's primary with it.
func (s *Server) SetTablets(tablets ...Tablet) {
	res := sqltypes.MakeTestResult(sqltypes.MakeTestFields(
		"Cell|Keyspace|Shard|TabletType|State|Alias|Hostname|PrimaryTermStartTime",
		"varchar|varchar|varchar|varchar|varchar|varchar|varchar|varchar"))
	for _, t := range tablets {
		typ, state, term := t.Type, t.State, ""
		if typ == "" {
			typ = "PRIMARY"
		}
		if state == "" {
			state = "SERVING"
		}
		if !t.TermStart.IsZero() {
			term = t.TermStart.UTC().Format(time.RFC3339)
		}
		res.Rows = append(res.Rows, []sqltypes.Value{sqltypes.NewVarChar("zone1"), sqltypes.NewVarChar(t.Keyspace),
			sqltypes.NewVarChar(t.Shard), sqltypes.NewVarChar(typ), sqltypes.NewVarChar(state), sqltypes.NewVarChar(t.Alias),
			sqltypes.NewVarChar("localhost"), sqltypes.NewVarChar(term)})
	}
	s.SetResult("show vitess_tablets", res)
}
