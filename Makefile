# eventpipe — the two commands that matter on a fresh machine:
#   make demo   bring the local stack up, run the pipeline and narrate a burst of commands
#   make test   bring the stack up (installing what is missing) and run every test
#   make test-unit  the tests that need no service (no stack, no Java), in seconds
SHELL       := /bin/bash
GO          ?= go
BIN         := bin/eventpipe
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TESTFLAGS   ?=
BENCHFLAGS  ?= -benchtime=300x

.PHONY: build image test test-unit deploy-test bench demo lint stack-up stack-down stack-status chromium clean

# VERSION, COMMIT and MODIFIED (below, with the image) go into the binary
# for `eventpipe version`, also where GOFLAGS=-buildvcs=false drops the
# toolchain's stamp (and where -buildvcs would fail on git's ownership
# check). The binary is static (CGO_ENABLED=0: it needs no C library), as
# the image's is and the tests' are, so all of them share one build cache.
build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(BUILD_LDFLAGS)' -o $(BIN) ./cmd/eventpipe

# The container image (docs/deploying.md, "The image"): a static binary
# built here, copied by deploy/image/Containerfile onto IMAGE_BASE.
# Nothing can be pulled on a machine without a registry: there, pass
# IMAGE_BASE=scratch, and the context gets what distroless would have
# given (this machine's CA bundle, an /etc/passwd naming uid 65532).
# VERSION and COMMIT go into the binary (`eventpipe version`, with
# MODIFIED) and the image's labels. It is tagged IMAGE_TAG and latest
# (what docker-compose.yml runs).
IMAGE       ?= eventpipe
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_TAG   ?= $(VERSION)
IMAGE_BASE  ?= gcr.io/distroless/static-debian12:nonroot
PODMAN      ?= podman
IMAGE_BUILD_FLAGS ?= --layers=false
IMAGE_CTX   ?= bin/image
CA_BUNDLE   ?= /etc/ssl/certs/ca-certificates.crt
BUILDINFO   := github.com/eventpipe/eventpipe/buildinfo
MODIFIED    ?= $(shell git status --porcelain >/dev/null 2>&1 && { [ -z "$$(git status --porcelain)" ] && echo false || echo true; })
BUILD_LDFLAGS = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).modified=$(MODIFIED)

image:
	rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)/rootfs
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w $(BUILD_LDFLAGS)' \
	  -o $(IMAGE_CTX)/eventpipe ./cmd/eventpipe
	@if [ "$(IMAGE_BASE)" = scratch ]; then \
	  mkdir -p $(IMAGE_CTX)/rootfs/etc/ssl/certs && \
	  printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >$(IMAGE_CTX)/rootfs/etc/passwd && \
	  printf 'root:x:0:\nnonroot:x:65532:\n' >$(IMAGE_CTX)/rootfs/etc/group && \
	  if [ -f "$(CA_BUNDLE)" ]; then cp "$(CA_BUNDLE)" $(IMAGE_CTX)/rootfs/etc/ssl/certs/ca-certificates.crt; \
	  else echo "warning: no CA bundle at $(CA_BUNDLE): the image cannot verify TLS servers (AWS) unless one is mounted (SSL_CERT_FILE)"; fi; \
	fi
	$(PODMAN) build $(IMAGE_BUILD_FLAGS) -f deploy/image/Containerfile --build-arg BASE=$(IMAGE_BASE) \
	  --build-arg VERSION=$(VERSION) --build-arg REVISION=$(COMMIT) --build-arg CREATED=$$(date -u +%Y-%m-%dT%H:%M:%SZ) \
	  -t $(IMAGE):$(IMAGE_TAG) -t $(IMAGE):latest $(IMAGE_CTX) || { \
	  [ "$(IMAGE_BASE)" = scratch ] || echo "make image: could not build on $(IMAGE_BASE); where it cannot be pulled, run \`make image IMAGE_BASE=scratch\`"; exit 1; }

stack-up: build
	$(BIN) stack up

stack-down: build
	$(BIN) stack down

stack-status: build
	$(BIN) stack status

# The status page's browser test drives Debian's chromium. As the stack
# does for Java and PostgreSQL, install it when it is missing, running as
# root and unless EVENTPIPE_STACK_NO_INSTALL is set; otherwise say how
# (the test then fails, saying so too).
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && [ -z "$$EVENTPIPE_STACK_NO_INSTALL" ]; then \
	    echo "chromium is missing: installing it with apt-get"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
	  else echo "chromium is missing: run \`sudo apt-get update && sudo apt-get install -y chromium\`"; fi; }

# Integration tests talk to the stack's real services; they fail (never
# skip) when one is missing.
# Four packages at once (go test's default is one per core): most of the
# integration packages' time is waiting on processes they kill and
# restart, groups that rebalance and services that answer, so on a
# 2-core machine four overlap those waits (measured: about 8 minutes
# instead of 11 for the whole suite). -timeout is only the last resort
# against a hang (each wait of a test fails on its own after
# EVENTPIPE_TEST_HANG_AFTER without progress): the slowest package took
# 14 minutes here with two CPU-bound processes beside the run, so 45
# leaves a machine slower still room.
# The run is CPU-bound: four packages, their child processes and the
# stack share the cores. Each test process and child therefore gets one
# scheduler thread per four cores (TEST_GOMAXPROCS, at least 1): on 2
# cores that cut the suite's CPU seconds by a fifth and its wall time
# from 17.5 to 14 minutes (docs/testing.md); the race detector finds
# races by happens-before, not by threads running at once. -parallel
# keeps go test's usual count (one per core, at least 2) for the tests
# that run in parallel. e2e, the longest package, starts first. -w
# leaves DWARF out of the test binaries (tracebacks and race reports do
# not use it), which a third of each link spent writing.
TEST_CPUS := $(shell getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
TEST_GOMAXPROCS ?= $(shell n=$(TEST_CPUS); echo $$(( n / 4 > 1 ? n / 4 : 1 )))
TEST_PARALLEL ?= $(shell n=$(TEST_CPUS); echo $$(( n > 2 ? n : 2 )))
# First the event schemas against their committed snapshot
# (schemas/events.json; docs/domains.md, "Changing an event"): a change
# stored events would not survive fails here, before any test runs.
test: stack-up chromium
	$(BIN) schemas check
	GOMAXPROCS=$(TEST_GOMAXPROCS) $(GO) test -race -count=1 -p 4 -parallel $(TEST_PARALLEL) -ldflags=-w -timeout 45m $(TESTFLAGS) ./e2e ./...
	$(MAKE) deploy-test

# The Helm chart's test (deploy/helm/eventpipe; docs/deploying.md, "The
# Helm chart"): helm lint, and `helm template` of each ci/ values file
# decoded strictly into the Kubernetes types and checked. A Go module of
# its own (deploy/deploytest), so that Helm and k8s.io stay out of
# eventpipe's module graph; it needs no service. Its first build compiles
# Helm and the Kubernetes API: minutes.
deploy-test:
	cd deploy/deploytest && $(GO) vet ./... && $(GO) test -count=1 $(TESTFLAGS) ./...

# The unit tier: every test that needs no service (domains, rules,
# fixtures, codecs, the store contract on the memory store, pure logic;
# the event schemas' check too, as cmd/eventpipe's TestSchemasCheck…).
# -short makes each integration test skip, saying so (dev/testenv);
# the service addresses point at a closed port, so a test that reaches
# for a service any other way fails here instead of passing by chance.
UNIT_ENV := EVENTPIPE_DYNAMODB_ENDPOINT=http://127.0.0.1:1 EVENTPIPE_KAFKA_BROKERS=127.0.0.1:1 \
	EVENTPIPE_POSTGRES_URL=postgres://eventpipe@127.0.0.1:1/eventpipe ELASTICSEARCH_URL=http://127.0.0.1:1
test-unit:
	$(UNIT_ENV) $(GO) test -short -count=1 -timeout 5m $(TESTFLAGS) ./...

# Benchmarks report ratios against raw baselines measured in the same run;
# docs/benchmarks.md gets their figures and docs/benchmarks.png a chart of
# the ratios and the end-to-end latency (the full output stays in
# .bench.out).
bench: stack-up
	set -o pipefail; $(GO) test -run '^$$' -bench . $(BENCHFLAGS) -timeout 60m ./... 2>&1 | tee .bench.out
	$(GO) run ./cmd/bench-report --in .bench.out --out docs/benchmarks.md --png docs/benchmarks.png

demo: build
	$(BIN) demo

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin
