# edgeaip — see README.md.
GO       ?= go
BIN      := bin
CMDS     := aip-server aip-agent aipctl
TOOLS    := read_file write_file list_dir hash_file
GO_EXAMPLE := hash_file_go

# What the full test suite needs besides Go: the one list of it. `make deps`
# installs it all (.ci/run calls it); a test whose tool is missing skips,
# saying which. Debian packages, each with the reason it is here:
#
# clang, lld, wasi-libc and its runtime library build the tools in C: the
# stock tools (wasmtools/tools) and the example
# (wasmtools/examples/c/dir_usage), which tests rebuild to check what is
# committed, the tool aipctl tool init writes with --lang c, which an
# aipctl test builds, and the symlinks fixture (make fixtures).
APT_PACKAGES := clang lld wasi-libc libclang-rt-14-dev-wasm32
# rustc and its standard library for wasm32-wasi (Rust 1.63; rustup's
# wasm32-wasip1 is the same target, renamed) build the tool aipctl tool
# init writes with --lang rust, which an aipctl test builds and runs.
APT_PACKAGES += rustc libstd-rust-dev-wasm32
# wabt's wat2wasm rebuilds the .wat fixtures (make fixtures).
APT_PACKAGES += wabt
# The kiosk test and the dashboard's end-to-end test drive Debian's chromium.
APT_PACKAGES += chromium
# tmux gives tests a terminal, where what a user sees there matters (make
# demo waits for Enter only on a terminal: e2e/demo_test.go).
APT_PACKAGES += tmux
# The agent built for arm64, armv7 and riscv64 runs under qemu-user
# (e2e's cross-architecture test).
APT_PACKAGES += qemu-user-static
# UFO's pydantic models (testdata/protocol/ufo_wire.py) check our JSON
# frames; Debian 12 ships pydantic 1, which the script also speaks.
APT_PACKAGES += python3-pydantic
# UFO's own galaxy client imports websockets (e2e/ufo_galaxy_test.go, which
# runs only with a UFO checkout in EDGEAIP_UFO_DIR).
APT_PACKAGES += python3-websockets
# PostgreSQL, the store cluster nodes share: the store's tests run on a
# throwaway cluster (initdb, postgres) as well as on SQLite, and so do
# aip-server store copy's (internal/pgtest).
APT_PACKAGES += postgresql
# systemd-analyze verify checks the packaged unit (cmd/aip-agent), without
# what systemd recommends.
APT_PACKAGES_NO_RECOMMENDS := systemd
# node and npm run the MCP servers below. Installed only when there is no
# node at all: a node from elsewhere (NodeSource's bundles npm) would
# conflict with Debian's npm package.
APT_PACKAGES_NODE := nodejs npm

# npm packages the MCP tests run, pinned: the one list of them, which
# internal/testenv reads. Tests look for them in $(NPM_CACHE)
# (EDGEAIP_NPM_CACHE overrides it), skip, saying so, if one is absent, and
# fail if another version is installed.
NPM_CACHE    ?= $(or $(EDGEAIP_NPM_CACHE),.cache/npm)
NPM_PACKAGES := @modelcontextprotocol/server-everything@2026.8.31 \
                @modelcontextprotocol/server-filesystem@2026.8.31 \
                @playwright/mcp@0.0.83 \
                @modelcontextprotocol/sdk@1.32.2 \
                @modelcontextprotocol/inspector@2.12.0 \
                @modelcontextprotocol/client@2.3.1 \
                @modelcontextprotocol/ext-tasks@0.2.2

# The version the three binaries carry (internal/version): make build
# VERSION=1.2.3 stamps a release. Unset, they are a development build of
# COMMIT (git rev-parse HEAD), marked modified when the work tree has
# changes not committed; a build from a tarball, with no git, may pass
# COMMIT itself. go build without make records the commit too, unless
# -buildvcs=false.
VERSION  ?=
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED ?= $(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true)
ifneq ($(VERSION),)
ifneq ($(shell echo '$(VERSION)' | grep -Ex '[0-9][0-9A-Za-z.+-]*'),$(VERSION))
$(error VERSION=$(VERSION): want a release version such as 1.2.3)
endif
endif
VERSION_PKG := github.com/edgeaip/edgeaip/internal/version
VERSION_LDFLAGS := -X $(VERSION_PKG).release=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT) -X $(VERSION_PKG).modified=$(MODIFIED)

.PHONY: all build tools cross footprint fixtures generate test test-under-load test-postgres fuzz bench-fuel deps deps-apt deps-npm demo demo-cluster soak-cluster chaos-cluster clean FORCE
.DELETE_ON_ERROR:

all: build

build: $(CMDS:%=$(BIN)/%) tools

$(CMDS:%=$(BIN)/%): $(BIN)/%: FORCE
	$(GO) build -trimpath -ldflags "$(VERSION_LDFLAGS)" -o $@ ./cmd/$*

# The agent as it ships to boards: static and stripped, for each
# architecture operators have. wazero compiles on amd64 and arm64 and
# interprets on the others; fuel is counted the same way on each, and a
# call's count is identical on each with tools.reproducible: true (with the
# default, false, it varies a little from run to run: tools read the clock).
CROSS := amd64 arm64 arm riscv64

cross:
	@mkdir -p $(BIN)/cross
	@for arch in $(CROSS); do \
		echo "aip-agent linux/$$arch"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch GOARM=7 $(GO) build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" \
			-o $(BIN)/cross/aip-agent-linux-$$arch ./cmd/aip-agent || exit 1; \
	done
	@ls -l $(BIN)/cross

# Binary sizes, start-up time and memory of the agent, on loopback with the
# stock tools; BENCHMARKS.md records what it prints.
footprint: build cross
	$(GO) run ./scripts/footprint -bin $(BIN)

tools: $(TOOLS:%=$(BIN)/tools/%.wasm) $(BIN)/tools/dir_usage.wasm $(BIN)/examples/$(GO_EXAMPLE).wasm

# The stock tools are written in C (wasmtools/tools, some 50 KB each), and
# committed built, each beside its source with its manifest embedded, as
# wasmtools/tools/build.sh builds them (clang and wasi-libc, the reactor
# form); make fixtures rebuilds them. Sign them for devices that require
# signatures: aipctl tool sign --key KEY.key bin/tools/NAME.wasm
.SECONDEXPANSION:
$(TOOLS:%=$(BIN)/tools/%.wasm): $(BIN)/tools/%.wasm: wasmtools/tools/$$*/$$*.wasm
	@mkdir -p $(BIN)/tools
	cp $< $@

# The example tool in Go (wasmtools/examples/go) is a WASI preview1 reactor
# built with wasmtools/sdk/reactor, which agents initialize once and start
# each call from a snapshot of, with its manifest embedded (aipctl tool
# pack). It goes to bin/examples, not bin/tools, which is what a board is
# given: a Go tool costs a device some 3.7 MB of module and seconds to
# compile (README). -checklinkname=0 lets the SDK reseed the Go runtime's
# random state (wasmtools/sdk/reactor). internal/testenv builds it for the
# tests with these two variables: the one place they are set. GO_EXAMPLE,
# at the top, names it.
TOOL_BUILDMODE := c-shared
TOOL_LDFLAGS   := -s -w -checklinkname=0

$(BIN)/examples/$(GO_EXAMPLE).wasm: $(BIN)/aipctl FORCE
	@mkdir -p $(BIN)/examples
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildmode=$(TOOL_BUILDMODE) -ldflags="$(TOOL_LDFLAGS)" -o $@ ./wasmtools/examples/go/$(GO_EXAMPLE)
	$(BIN)/aipctl tool pack $@ --manifest wasmtools/examples/go/$(GO_EXAMPLE)/$(GO_EXAMPLE).json >/dev/null

# The example tool in C is committed built (its build.sh needs clang and
# wasi-libc); make fixtures rebuilds it.
$(BIN)/tools/dir_usage.wasm: wasmtools/examples/c/dir_usage/dir_usage.wasm
	@mkdir -p $(BIN)/tools
	cp $< $@

# Rebuilds the committed .wasm fixtures, the stock tools and the C example
# from source.
fixtures:
	wasmtools/tools/build.sh
	testdata/tools/build.sh
	testdata/fuel/build.sh
	wasmtools/examples/c/dir_usage/build.sh

# Rewrites the generated Go files (the CBOR fast path's per-field code,
# from protocol's message structs); a test fails while one is stale.
generate:
	$(GO) generate ./...

# The e2e package runs for minutes; -timeout leaves it room on a busy
# machine, where go test's default of 10 minutes was seen to run out. The
# store's suite runs twice: on SQLite with the rest, then on PostgreSQL.
# EDGEAIP_TEST_STORE=postgres runs the server's tests on PostgreSQL too:
# make test-postgres.
test:
	$(GO) vet ./...
	$(GO) test -timeout 25m ./...
	EDGEAIP_TEST_STORE=postgres $(GO) test ./server/internal/store/

# make test while scripts/cpuhog keeps both cores busy (HOG_LOOPS to
# change), for an hour at most: the suite must hold on a loaded machine,
# so its tests wait for events, never for time. -count=1: a result cached
# from a quiet run shows nothing.
HOG_LOOPS ?= 2

test-under-load:
	$(GO) build -o $(BIN)/cpuhog ./scripts/cpuhog
	GOFLAGS="$(GOFLAGS) -count=1" $(BIN)/cpuhog -loops $(HOG_LOOPS) -for 1h $(MAKE) --no-print-directory test

test-postgres:
	EDGEAIP_TEST_STORE=postgres $(GO) test ./server/internal/store/ ./server/

# deps-npm runs after deps-apt, not beside it under -j: npm may be what
# deps-apt installs.
deps: deps-apt
	@$(MAKE) --no-print-directory deps-npm

# Quiet and unattended: sudo unless root; without apt-get (not Debian) it
# names the packages to find and goes on.
SUDO = $(if $(filter 0,$(shell id -u)),,sudo)
APT  = DEBIAN_FRONTEND=noninteractive apt-get

deps-apt:
	@if ! command -v apt-get >/dev/null; then \
		echo "deps-apt: no apt-get; install these Debian packages' equivalents: $(APT_PACKAGES) $(APT_PACKAGES_NO_RECOMMENDS) $(APT_PACKAGES_NODE)" >&2; \
		exit 0; \
	fi; \
	set -e; \
	echo "apt-get install $(APT_PACKAGES) $(APT_PACKAGES_NO_RECOMMENDS)"; \
	$(SUDO) $(APT) update -qq; \
	$(SUDO) $(APT) install -y -qq $(APT_PACKAGES) >/dev/null; \
	$(SUDO) $(APT) install -y -qq --no-install-recommends $(APT_PACKAGES_NO_RECOMMENDS) >/dev/null; \
	if ! command -v node >/dev/null; then \
		echo "apt-get install $(APT_PACKAGES_NODE)"; \
		$(SUDO) $(APT) install -y -qq $(APT_PACKAGES_NODE) >/dev/null; \
	fi

deps-npm:
	mkdir -p $(NPM_CACHE)
	npm install --prefix $(NPM_CACHE) --no-audit --no-fund --save-exact $(NPM_PACKAGES)

# Each decoder's fuzz target for FUZZTIME; their seed corpora already run as
# plain tests in `make test`.
# The fuel rewriter's target minimises for at most 3 s: longer, and the
# fuzzer seems to stall while it shrinks a large generated module.
FUZZTIME    ?= 30s
FUZZTARGETS := ./protocol:FuzzDecodeCBOR ./protocol:FuzzDecodeJSON ./wasmtools/meter:FuzzInstrument \
               ./wasmtools/meter:FuzzInstrumentBytes ./wasmtools/meter:FuzzInstrumentSnapshot ./wasmtools/section:FuzzSection

fuzz:
	@set -e; for t in $(FUZZTARGETS); do \
		echo "fuzz $${t#*:} for $(FUZZTIME)"; \
		$(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s -parallel 1; \
	done

# Metered over unmetered, and WithCloseOnContextDone over unmetered, for
# the CPU suite of testdata/fuel, side by side; see BENCHMARKS.md.
bench-fuel:
	wasmtools/meter/bench.sh

demo: build
	./scripts/demo.sh

# Cluster mode on loopback: PostgreSQL, NATS (natsd), three nodes, an agent
# on each, a fleet, one node killed; it cleans up after itself.
demo-cluster: build
	$(GO) build -o $(BIN)/natsd ./internal/natstest/natsd
	./scripts/demo-cluster.sh

# The long run of cluster mode: rolling restarts (SIGTERM, drain) of every
# node, one at a time, under load, and nothing lost or run twice.
# SOAK_MINUTES (default 5) is how long the load runs.
soak-cluster:
	EDGEAIP_SOAK_CLUSTER=$(or $(SOAK_MINUTES),5) $(GO) test -timeout 60m -run TestClusterSoak -v ./e2e/

# The fault run of cluster mode (issue 36), about 10 minutes: three nodes,
# PostgreSQL, NATS and 15 agents under load through every node, one fault
# a phase (kill -9, SIGSTOP, a partition from NATS, one from PostgreSQL,
# an outage of PostgreSQL, a rolling restart), and for each a table of
# commands acknowledged and lost, answered failed but run, run twice, and
# unavailable seconds (BENCHMARKS.md). Not part of make test.
# CHAOS_FAULTS (default all) picks faults by name, comma-separated;
# CHAOS_ROUNDS (default 2) is how many times each runs.
chaos-cluster:
	EDGEAIP_CHAOS_CLUSTER=$(or $(CHAOS_FAULTS),all) EDGEAIP_CHAOS_ROUNDS=$(or $(CHAOS_ROUNDS),2) \
		$(GO) test -timeout 30m -run TestClusterChaos -v ./e2e/

clean:
	rm -rf $(BIN)
