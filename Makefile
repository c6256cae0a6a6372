# edgeaip — see README.md.
GO       ?= go
BIN      := bin
CMDS     := aip-server aip-agent aipctl
TOOLS    := read_file write_file list_dir hash_file

.PHONY: all build tools test fuzz demo clean FORCE
.DELETE_ON_ERROR:

all: build

build: $(CMDS:%=$(BIN)/%) tools

$(CMDS:%=$(BIN)/%): $(BIN)/%: FORCE
	$(GO) build -trimpath -o $@ ./cmd/$*

tools: $(TOOLS:%=$(BIN)/tools/%.wasm)

# Stock tools are WASI preview1 command modules built from wasmtools/tools,
# each with its description sidecar beside it.
$(TOOLS:%=$(BIN)/tools/%.wasm): $(BIN)/tools/%.wasm: FORCE
	@mkdir -p $(BIN)/tools
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -ldflags="-s -w" -o $@ ./wasmtools/tools/$*
	cp wasmtools/tools/$*/$*.json $(BIN)/tools/$*.json

test:
	$(GO) vet ./...
	$(GO) test ./...

# Each decoder's fuzz target for FUZZTIME; their seed corpora already run as
# plain tests in `make test`.
FUZZTIME    ?= 30s
FUZZTARGETS := ./protocol:FuzzDecodeCBOR ./protocol:FuzzDecodeJSON

fuzz:
	@set -e; for t in $(FUZZTARGETS); do \
		echo "fuzz $${t#*:} for $(FUZZTIME)"; \
		$(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME); \
	done

demo: build
	./scripts/demo.sh

clean:
	rm -rf $(BIN)
