# edgeaip — see README.md.
GO       ?= go
BIN      := bin
CMDS     := aip-server aip-agent aipctl
TOOLS    := read_file write_file list_dir hash_file

# npm packages the MCP tests run, pinned; tests look for them in
# $(NPM_CACHE) (EDGEAIP_NPM_CACHE overrides it) and skip, saying so, if absent.
NPM_CACHE    ?= $(or $(EDGEAIP_NPM_CACHE),.cache/npm)
NPM_PACKAGES := @modelcontextprotocol/server-everything@2026.8.31 \
                @modelcontextprotocol/server-filesystem@2026.8.31 \
                @playwright/mcp@0.0.83

.PHONY: all build tools test deps-npm demo clean FORCE
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

deps-npm:
	mkdir -p $(NPM_CACHE)
	npm install --prefix $(NPM_CACHE) --no-audit --no-fund $(NPM_PACKAGES)

demo: build
	./scripts/demo.sh

clean:
	rm -rf $(BIN)
