GO ?= go
BIN := bin/berth
PG := scripts/pg-local.sh

.PHONY: build test unit bench run pg-up pg-down lint fmt tidy

build:
	$(GO) build -o $(BIN) ./cmd/agent

# Every test, against a real throwaway PostgreSQL (started here when BERTH_TEST_DATABASE_URL is unset).
test: build
	@url="$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}" && \
	BERTH_TEST_DATABASE_URL="$$url" BERTH_BINARY="$(CURDIR)/$(BIN)" $(GO) test -race -count=1 -timeout 20m ./...

pg-up:
	@$(PG) start

pg-down:
	@$(PG) stop

fmt:
	gofmt -w $$(git ls-files '*.go')

lint:
	$(GO) vet ./...

# Berth's static-environ throughput, latency and memory, measured beside River on the same
# database server (see bench/doc.go). BENCH_FLAGS passes flags, e.g. BENCH_FLAGS="-n 2000".
bench: build
	$(GO) build -o bin/berth-bench ./bench
	@url="$${BERTH_BENCH_DATABASE_URL:-$${BERTH_TEST_DATABASE_URL:-$$($(PG) start)}}" && \
	BERTH_BENCH_DATABASE_URL="$$url" BERTH_BINARY="$(CURDIR)/$(BIN)" bin/berth-bench $(BENCH_FLAGS)

# The agent on the example provisioner set (examples/provisioners.json); without
# BERTH_DATABASE_URL a throwaway local PostgreSQL is started and a `berth` database used.
run: build
	scripts/run-local.sh
