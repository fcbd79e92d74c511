# eventpipe — the two commands that matter on a fresh machine:
#   make demo   bring the local stack up, run the pipeline and narrate a burst of commands
#   make test   bring the stack up (installing what is missing) and run every test
SHELL       := /bin/bash
GO          ?= go
BIN         := bin/eventpipe
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TESTFLAGS   ?=
BENCHFLAGS  ?= -benchtime=300x

.PHONY: build test bench demo lint stack-up stack-down stack-status clean

build:
	$(GO) build -o $(BIN) ./cmd/eventpipe

stack-up: build
	$(BIN) stack up

stack-down: build
	$(BIN) stack down

stack-status: build
	$(BIN) stack status

# Integration tests talk to the stack's real services; they fail (never
# skip) when one is missing.
test: stack-up
	$(GO) test -race -count=1 -timeout 25m $(TESTFLAGS) ./...

# Benchmarks report ratios against raw baselines measured in the same run;
# docs/benchmarks.md gets their figures (the full output stays in
# .bench.out).
bench: stack-up
	set -o pipefail; $(GO) test -run '^$$' -bench . $(BENCHFLAGS) -timeout 60m ./... 2>&1 | tee .bench.out
	$(BIN) bench-report --in .bench.out --out docs/benchmarks.md

demo: build
	$(BIN) demo

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin
