# vstream-gateway — common tasks. `make demo` runs the product on a local
# Vitess cluster; `make test` runs every test, end-to-end included.

GO        ?= go
BIN       ?= bin/vstream-gateway
DEMO_ADDR ?= 127.0.0.1:8080
DEMO_DATA ?= /var/tmp/vsg-demo

.PHONY: build test test-faults test-deps unit e2e demo screenshots cluster-up cluster-down vet fuzz bench lint-api bench-fanout bench-cdn soak

build:
	@echo "building the gateway into $(BIN) (the first build compiles its dependencies: a few minutes on 2 cores)"
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/vstream-gateway

# `go run` compiles vtlocal, which imports Vitess, before it can say
# anything: on a fresh machine that alone takes minutes, so say so first.
cluster-up:
	@echo "cluster-up: compiling the cluster tool, then bringing up a local Vitess cluster (first run: Vitess is built too, 5-10 minutes on 2 cores; later runs: seconds)"
	$(GO) run ./cmd/vtlocal up

cluster-down:
	$(GO) run ./cmd/vtlocal down

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# Everything: unit tests (race detector on), store suites against a real
# redis-server, and the end-to-end tests on the real local cluster.
# Packages compile in parallel first; the tests then run one package at a
# time, because the end-to-end tests and vtlocal's own (private) cluster
# test would otherwise start two Vitess clusters at once on two cores.
test: vet cluster-up test-deps
	$(GO) test -race -count=1 -run '^$$' ./... >/dev/null
	VSG_E2E=1 $(GO) test -race -count=1 -p 1 -timeout 25m ./...

# Fault tests too slow, heavy or intrusive for every run (VSG_FAULTS=1;
# they skip otherwise): reparents of a shard with a replica tablet (≈ 2 min;
# as root, compiles a small UDF into MariaDB's plugin directory, see
# vtlocal/README.md), a 512 MiB transaction under a 256 MiB memory limit and
# the gateway killed inside one (VSG_BIGTXN_ROWS rows of 4,000 bytes;
# default 131072; minutes each).
test-faults: cluster-up
	VSG_FAULTS=1 VSG_E2E=1 $(GO) test -race -count=1 -p 1 -timeout 60m -run 'TestReparents|TestHugeTransaction' -v ./e2e/ | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|RESULT|_test.go'

# The soak (e2e TestSoak, VSG_SOAK=1; skipped otherwise): SOAK_CYCLES
# cycles of split, merge and MoveTables there and back under a running
# writer, with readers on every transport on two gateways, one killed each
# cycle, and two webhooks; every row checked exactly once after each cycle,
# then one line `SOAK: cycles=… missing=0 repeated=0 …`. A few minutes per
# cycle. It reshards customer: on a cluster that others use, run it on a
# private one with SOAK_PORT_OFFSET=N (brought up beside the shared one
# under /var/tmp/vsg-vtdataroot-N; stop it afterwards with
# `go run ./cmd/vtlocal -port-offset N -data-root /var/tmp/vsg-vtdataroot-N down`).
SOAK_CYCLES      ?= 10
SOAK_PORT_OFFSET ?=
soak:
	@if [ -z "$(SOAK_PORT_OFFSET)" ]; then $(MAKE) --no-print-directory cluster-up; fi
	VSG_E2E=1 VSG_SOAK=1 VSG_SOAK_CYCLES=$(SOAK_CYCLES) VSG_E2E_PORT_OFFSET=$(SOAK_PORT_OFFSET) \
		$(GO) test -count=1 -run '^TestSoak$$' -v -timeout $$(( 10 + $(SOAK_CYCLES) * 8 ))m ./e2e/

# The dashboard's end-to-end test drives headless Chromium (Debian package
# chromium), installed here when missing and running as root; the pull
# cache test (e2e TestPullBehindCache) runs Varnish (Debian package
# varnish) in front of the gateway, likewise.
# The network stall test (e2e TestVtgateNetworkStall) drops packets with
# iptables, as root; installed here when missing, and skipped (saying why)
# when not root. The JavaScript client's tests (e2e TestJSClient) need its
# development packages (ws, esbuild, typescript), installed with npm ci.
APT_CHROMIUM = DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
APT_IPTABLES = DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables >/dev/null
APT_VARNISH  = DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends varnish >/dev/null
test-deps:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
		{ $(APT_CHROMIUM) || { apt-get update -qq && $(APT_CHROMIUM); }; }; } || \
		{ echo "the dashboard test needs Chromium: apt-get install chromium"; exit 1; }
	@PATH="$$PATH:/usr/sbin" command -v varnishd >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
		{ $(APT_VARNISH) || { apt-get update -qq && $(APT_VARNISH); }; }; } || \
		{ echo "the pull cache test needs Varnish: apt-get install varnish"; exit 1; }
	@[ "$$(id -u)" != 0 ] || PATH="$$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null 2>&1 || \
		$(APT_IPTABLES) || { apt-get update -qq && $(APT_IPTABLES); }
	@command -v node >/dev/null 2>&1 || { echo "the JavaScript client's tests need Node.js 20 or later (node, npm)"; exit 1; }
	@[ -f clients/js/node_modules/.package-lock.json ] && [ clients/js/node_modules/.package-lock.json -nt clients/js/package-lock.json ] || \
		{ echo "installing the JavaScript client's development packages (npm ci in clients/js)"; npm ci --prefix clients/js --no-audit --no-fund --loglevel=error; }
	@echo "building the JavaScript client's browser bundle (clients/js/dist)"; npm run --prefix clients/js --silent build -- --log-level=warning

# The README's screenshots of the console (docs/console/*.png), taken by its
# end-to-end tests on the real cluster, so they show what the console really
# shows: TestConsole (overview, stream), TestConsoleWebhooks, TestConsoleReshard.
# The last reshards customer 0 -> -80,80- and back (and recreates a cluster
# whose customer keyspace it finds resharded): on a cluster that others use,
# take them on a private one with SCREENSHOTS_PORT_OFFSET=N (brought up
# beside the shared one under /var/tmp/vsg-vtdataroot-N; stop it afterwards
# with `go run ./cmd/vtlocal -port-offset N -data-root /var/tmp/vsg-vtdataroot-N down`).
SCREENSHOTS_PORT_OFFSET ?=
screenshots: test-deps
	@if [ -z "$(SCREENSHOTS_PORT_OFFSET)" ]; then $(MAKE) --no-print-directory cluster-up; fi
	VSG_E2E=1 VSG_E2E_PORT_OFFSET=$(SCREENSHOTS_PORT_OFFSET) VSG_SCREENSHOTS=$(CURDIR)/docs/console \
		$(GO) test -count=1 -p 1 -run '^TestConsole(Reshard|Webhooks)?$$' -v -timeout 15m ./e2e/

# Unit tests only (no cluster needed). The end-to-end tests skip, and the
# summary says so (e2e "[no tests to run]"); the last line repeats it.
unit:
	$(GO) test -race -count=1 ./...
	@echo "unit tests passed; the END-TO-END TESTS DID NOT RUN (make test runs them)"

# Lint the API description (Redocly CLI from the npm registry; rules in redocly.yaml).
lint-api:
	npx --yes @redocly/cli@2.77.0 lint openapi.yaml

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 60s ./cursor/
	$(GO) test -run '^$$' -fuzz FuzzRequests -fuzztime 60s ./server/
	$(GO) test -run '^$$' -fuzz FuzzTokenHeader -fuzztime 30s ./server/
	$(GO) test -run '^$$' -fuzz FuzzVerify -fuzztime 30s ./auth/
	$(GO) test -run '^$$' -fuzz FuzzDecoder -fuzztime 30s ./client/

# The demo runs with authentication on: a secret is generated once into
# $(DEMO_DATA)/jwt-secret and a ready admin token is printed.
demo: cluster-up build
	@mkdir -p $(DEMO_DATA)
	@test -s $(DEMO_DATA)/jwt-secret || (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > $(DEMO_DATA)/jwt-secret)
	@TOKEN=$$(VSG_JWT_SECRET=$$(cat $(DEMO_DATA)/jwt-secret) $(BIN) token --sub demo --scope admin --ttl 24h); \
	echo; \
	echo "  token:      $$TOKEN"; \
	echo "  dashboard:  http://$(DEMO_ADDR)/?stream=customers&access_token=$$TOKEN"; \
	echo "  changes:    curl -H \"Authorization: Bearer $$TOKEN\" 'http://$(DEMO_ADDR)/v1/streams/customers/changes?wait=10s'"; \
	echo "  insert:     mysql -h 127.0.0.1 -P 15306 -u root customer -e \"insert into customer(email) values ('demo@example.com')\""; \
	echo
	VSG_JWT_SECRET=$$(cat $(DEMO_DATA)/jwt-secret) $(BIN) --listen $(DEMO_ADDR) --data-dir $(DEMO_DATA) --streams-file examples/streams.yaml

# Replay 200k rows from a saved cursor: plain Go VStream client vs the
# gateway's HTTP pull and WebSocket; plus the encoder and cursor benchmarks.
# The replay runs twice: with everything sharing every CPU, then "split",
# the cluster on CPU 0 and the gateway and clients on the others (as with
# the gateway on hosts of its own; needs two CPUs).
# The replay runs through the reader's own VStream (--ring-entries 0, the
# catch-up path), then once more served from the stream's ring.
BENCH_REPLAY = VSG_E2E=1 VSG_BENCH=1 $(GO) test -count=1 -run TestReplayThroughput -v -timeout 20m ./e2e/ | grep -E 'RESULT|rows/s|loaded|^ok|FAIL'
bench: cluster-up
	$(GO) test -run '^$$' -bench . -benchmem ./event/ ./cursor/
	VSG_BENCH_RING_ENTRIES=0 $(BENCH_REPLAY)
	@if [ "$$(nproc)" -ge 2 ]; then VSG_BENCH_RING_ENTRIES=0 taskset -c 1-$$(($$(nproc)-1)) sh -c "$(BENCH_REPLAY)"; else echo "one CPU: split run skipped"; fi
	$(BENCH_REPLAY)

# Pull pages behind a cache (README "Pull behind a cache"): 2,000 long-pollers
# in step at 200 rows/s through Varnish, straight to the gateway, and as
# 2,000 WebSockets, side by side; then 500 readers of a 100,000-row snapshot
# through Varnish. On a private cluster: CDN_PORT_OFFSET=N.
CDN_PORT_OFFSET ?=
bench-cdn: test-deps
	@if [ -z "$(CDN_PORT_OFFSET)" ]; then $(MAKE) --no-print-directory cluster-up; fi
	VSG_E2E=1 VSG_BENCH_CDN=1 VSG_E2E_PORT_OFFSET=$(CDN_PORT_OFFSET) \
		$(GO) test -count=1 -p 1 -run '^TestPullCache(Load|Snapshot)$$' -v -timeout 40m ./e2e/

# Fan-out comparison (README "Load tool"): K WebSocket readers of rows
# written at FANOUT_RATE, against the gateway and then against Centrifugo
# fed by one VStream publisher; a side-by-side table at the end. Centrifugo
# is built once from the Go module proxy into $(BENCH_DIR)/bin.
BENCH_DIR          ?= .bench
VITESS_BIN         ?= .vitess/bin
CENTRIFUGO_VERSION ?= 6.9.1
FANOUT_K           ?= 1 100 1000
FANOUT_RATE        ?= 200
FANOUT_DURATION    ?= 20s
FANOUT_FLAGS       ?=
FANOUT_IDLE_K      ?=
# bench/fanout's own flags, e.g. another cluster's addresses (vtlocal -port-offset):
# --mysql 127.0.0.1:45306 --vtgate localhost:45991 --vtgate-vars http://localhost:45001/debug/vars --vtctld localhost:45999
FANOUT_BENCH_FLAGS ?=

$(BENCH_DIR)/bin/centrifugo:
	GOBIN=$(abspath $(BENCH_DIR)/bin) $(GO) install -ldflags "-X github.com/centrifugal/centrifugo/v6/internal/build.Version=$(CENTRIFUGO_VERSION)" github.com/centrifugal/centrifugo/v6@v$(CENTRIFUGO_VERSION)

bench-fanout: cluster-up $(BENCH_DIR)/bin/centrifugo
	$(GO) build -o $(BENCH_DIR)/bin/ ./cmd/vstream-gateway ./cmd/vsg-load ./cmd/vsg-centrifugo-pub
	$(GO) run ./bench/fanout --bin $(BENCH_DIR)/bin --vitess-bin $(VITESS_BIN) --out $(BENCH_DIR)/fanout \
		--k "$(FANOUT_K)" --idle-k "$(FANOUT_IDLE_K)" --rate $(FANOUT_RATE) --duration $(FANOUT_DURATION) --load-flags "$(FANOUT_FLAGS)" $(FANOUT_BENCH_FLAGS)
