GO ?= go
BIN := bin/berth
PG := scripts/pg-local.sh

.PHONY: build test fuzz bench bench-static run pg-up pg-down lint fmt k8s-up k8s-down e2e-k8s image

# Built static and with -trimpath, as the image's binary is, so that make image (and the
# test that runs it) reuses this build's compiled packages instead of compiling them again.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/agent

# The container image, built with no container engine (cmd/berth-image): a static binary
# stamped with VERSION, in an OCI image layout (IMAGE_DIR/oci) and a docker load tarball
# (IMAGE_DIR/berth.tar), tagged IMAGE_TAG. The Dockerfile builds the same image where a
# container engine runs: docker build --build-arg VERSION=... --build-arg REVISION=... .
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_DIR ?= bin/image
IMAGE_TAG ?= berth:$(VERSION)
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath \
		-ldflags "-s -w -X main.version=$(VERSION)" -o $(IMAGE_DIR)/berth ./cmd/agent
	$(GO) run ./cmd/berth-image -binary $(IMAGE_DIR)/berth -arch $(IMAGE_ARCH) \
		-version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH) \
		-oci-layout $(IMAGE_DIR)/oci -tarball $(IMAGE_DIR)/berth.tar -tag $(IMAGE_TAG)

# Every test, against a real throwaway PostgreSQL (started here when BERTH_TEST_DATABASE_URL is unset),
# and every Go benchmark once (-benchtime 1x), so that none stops working unnoticed.
test: build
	@url="$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}" && \
	BERTH_TEST_DATABASE_URL="$$url" BERTH_BINARY="$(CURDIR)/$(BIN)" $(GO) test -race -count=1 -timeout 20m -bench . -benchtime 1x ./...

# Every fuzz target of the repository (each func FuzzXxx of a test file, found afresh on every
# run by scripts/fuzz.sh), fuzzed one at a time for FUZZTIME each, e.g. make fuzz FUZZTIME=5m;
# FUZZMINIMIZETIME (10s) bounds minimizing each new input; FUZZFLAGS adds go test flags.
# make test runs the same targets on their seed corpus only.
FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 10s
fuzz:
	@url="$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}" && \
	BERTH_TEST_DATABASE_URL="$$url" GO="$(GO)" FUZZTIME="$(FUZZTIME)" \
	FUZZMINIMIZETIME="$(FUZZMINIMIZETIME)" FUZZFLAGS="$(FUZZFLAGS)" scripts/fuzz.sh

pg-up:
	@$(PG) start

pg-down:
	@$(PG) stop

fmt:
	gofmt -w $$(git ls-files '*.go')

# go vet and staticcheck (its default checks) on every package, also as built with the k8s
# tag (e2e/k8s). The staticcheck version is pinned here and fetched by go run through the
# module proxy, so nothing is installed and the project's go.mod is not involved.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) vet ./...
	$(GO) vet -tags k8s ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(STATICCHECK) -tags k8s ./...

# Every figure: the static environ's (bench-static) and the kubernetes environ's (bench-k8s,
# which starts the local control plane, building it on first use; make k8s-down stops it).
bench: bench-static bench-k8s

# Berth's static-environ throughput, latency and memory, measured beside River on the same
# database server, and the health sweep (see bench/doc.go). BENCH_FLAGS passes flags, e.g.
# BENCH_FLAGS="-n 2000".
# The runs on the sleep broker (a test broker whose reconciles only wait) take an agent built
# with the tag benchbroker, bin/berth-benchbroker; the agent users run has no such broker.
bench-static: build
	CGO_ENABLED=0 $(GO) build -trimpath -tags benchbroker -o bin/berth-benchbroker ./cmd/agent
	$(GO) build -o bin/berth-bench ./bench
	@url="$${BERTH_BENCH_DATABASE_URL:-$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}}" && \
	BERTH_BENCH_DATABASE_URL="$$url" BERTH_BINARY="$(CURDIR)/$(BIN)" \
	BERTH_BENCHBROKER_BINARY="$(CURDIR)/bin/berth-benchbroker" bin/berth-bench $(BENCH_FLAGS)

# Berth to try out (the README's quick start): three local stand-in runtime hosts (berth
# dev-hosts) and the agent on a provisioner set of them, on the embedded database unless
# BERTH_DATABASE_URL is set; Ctrl-C stops both. RUN_ARGS go to berth run, e.g.
# make run RUN_ARGS="--log-level debug".
run: build
	@scripts/run-local.sh $(RUN_ARGS)

# A local Kubernetes control plane (kube-apiserver, controller-manager, scheduler, kwok fake
# nodes, etcd), built once into a cache; k8s-up prints the admin kubeconfig path.
k8s-up:
	@scripts/k8s/up.sh

k8s-down:
	@scripts/k8s/down.sh

# The kubernetes environ's end-to-end suite against that control plane (started if needed,
# left running: make k8s-down stops it).
e2e-k8s: build
	@up="$$(scripts/k8s/up.sh)" && kc="$$(printf '%s\n' "$$up" | tail -n 1)" && \
	url="$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}" && \
	BERTH_KUBECONFIG="$$kc" BERTH_TEST_DATABASE_URL="$$url" BERTH_BINARY="$(CURDIR)/$(BIN)" \
	$(GO) test -tags k8s -count=1 -timeout 30m -v -run '^Test' ./e2e/k8s/

# The kubernetes figures of make bench, against the same control plane: 100 runtimes from
# insert to ready through the real agent, 20 hibernated runtimes from wake to ready, and
# objects applied per second (by the agent, and straight through the environ 16 at a time,
# without and with awaiting each rollout), with a TARGET line comparing the agent's with the
# environ's of the same run: each side's fastest of three rounds (-benchtime 3x), every round's
# rate beside it, each round's namespace deleted before the next. See e2e/k8s/bench_test.go.
.PHONY: bench-k8s
bench-k8s: build
	@up="$$(scripts/k8s/up.sh)" && kc="$$(printf '%s\n' "$$up" | tail -n 1)" && \
	url="$${BERTH_BENCH_DATABASE_URL:-$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}}" && \
	BERTH_KUBECONFIG="$$kc" BERTH_TEST_DATABASE_URL="$$url" BERTH_BINARY="$(CURDIR)/$(BIN)" \
	$(GO) test -tags k8s -count=1 -timeout 30m -run '^$$' -bench . -benchtime 3x ./e2e/k8s/
