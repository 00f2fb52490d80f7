# Concord — build, run and test.
#
#   make run       build and start `concord dev` (every role in one process)
#   make run-cluster  start a local cluster: etcd x3, Cassandra, Kafka, Redis, 18 `concord serve`
#                  processes (chat, voice and live comments) behind HAProxy (hack/run-cluster.sh);
#                  Ctrl-C stops it; rm -rf .concord-cluster starts over; REPLICATED=1 puts it on
#                  three Cassandra nodes (rf=3) and three Kafka brokers (hack/replicated.sh)
#   make test      install and start what the tests need, then run them all
#   make test-faults  the durability suite (test/faults): a nemesis from a printed seed kills,
#                  partitions, pauses and skews processes of a split cluster on replicated
#                  Cassandra and Kafka while clients run; a checker judges their history
#   make bench     run the benchmarks recorded in docs/benchmarks.md
#   make cluster-up   a single-node Kubernetes in its own namespaces (hack/node/up.sh)
#   make test-e2e  the operator's end-to-end suite on that node (test/kube)
#   make lint      gofmt, go vet, staticcheck, govulncheck
#   make generate  regenerate committed code (deepcopy, CRDs, protobuf, web bundle)
#   make web       rebuild the web client's committed bundle (web/dist) with esbuild

GO        ?= go
BIN       ?= bin
CACHE     ?= $(HOME)/.cache/concord
HTTP      ?= 127.0.0.1:8080
DATA_DIR  ?= ./.concord-data
GOTESTFLAGS ?= -count=1 -timeout 30m
# Linters run with `go run pkg@version`: a fresh machine needs only the Go
# module proxy. hack/vulncheck.sh pins govulncheck and its database.
STATICCHECK_VERSION ?= v0.8.2

export CONCORD_CACHE := $(CACHE)
# Every build, test and lint uses the toolchain go.mod names: a release
# whose standard library has no known vulnerability. A machine whose go is
# older (or set to GOTOOLCHAIN=local) fetches it from the Go module proxy
# once; `make GOTOOLCHAIN=local ...` overrides it.
export GOTOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)

.PHONY: all build run run-cluster test test-unit test-deps test-faults bench lint lint-fast generate web clean cluster-up cluster-down cluster-images test-e2e test-e2e-short

all: build

build:
	$(GO) build -o $(BIN)/concord ./runtime/cmd/concord

run: build
	$(BIN)/concord dev --http=$(HTTP) --data-dir=$(DATA_DIR)

REPLICATED ?= 0
# exec: the script's parent is make itself, so the cluster stops when make
# goes (hack/run-cluster.sh watches its parent).
run-cluster: build
	REPLICATED=$(REPLICATED) CONCORD_BIN=$(CURDIR)/$(BIN)/concord exec bash hack/run-cluster.sh

# test-deps installs and starts every real server and client the tests use;
# it writes their addresses to $(CACHE)/test-env.sh, which `test` sources.
test-deps:
	bash hack/test-deps.sh

test: test-deps lint
	. $(CACHE)/test-env.sh && $(GO) test -tags integration $(GOTESTFLAGS) ./...
	@echo "==> REST tests and bot-library conformance again, with concord on Cassandra"
	. $(CACHE)/test-env.sh && ks=$$(date +%s) && \
		CONCORD_API_TEST_STORE="cassandra://$$CONCORD_CASSANDRA/concord_api_$$ks" \
		CONCORD_CONFORMANCE_STORE="cassandra://$$CONCORD_CASSANDRA/concord_conf_$$ks" \
		$(GO) test -tags integration $(GOTESTFLAGS) ./runtime/edge/api/ ./test/conformance/
	@echo "==> REST tests and bot-library conformance again, against concord serve split over processes: 2 gateway and 2 api nodes behind HAProxy, 2 guild and 2 data nodes (internal/topology; test/cluster TestBalancedTopology drives the same shape with voice and live comments in the first pass)"
	. $(CACHE)/test-env.sh && CONCORD_API_TEST_TOPOLOGY=cluster CONCORD_CONFORMANCE_TOPOLOGY=cluster \
		$(GO) test -tags integration $(GOTESTFLAGS) ./runtime/edge/api/ ./test/conformance/
	@echo "==> chaos: kill -9 one replica of each role, the Redis, an etcd member and the Kafka broker under traffic (test/cluster TestChaos, alone: 15 processes)"
	. $(CACHE)/test-env.sh && $(GO) test -tags integration,chaos $(GOTESTFLAGS) -run TestChaos ./test/cluster/
	@echo "==> durability under faults, short schedule: one minority split and one Cassandra replica killed, on three Cassandra nodes (rf=3) and three Kafka brokers (hack/replicated.sh, started here if not running), history checked with porcupine (test/faults; the full schedule is make test-faults)"
	bash hack/replicated.sh start
	. $(CACHE)/test-env.sh && . $(CACHE)/replicated/env.sh && CONCORD_FAULTS_SCHEDULE=short \
		$(GO) test -tags faults $(GOTESTFLAGS) ./test/faults/
	@echo "==> the operator on a real single-node Kubernetes, short form (test/kube: chart, cluster, bots, eviction drain, live; hack/node/short.sh builds the node binaries first when they are not cached)"
	$(MAKE) test-e2e-short

# FAULTS_SCHEDULE=short (what `make test` runs: one minority split and one
# Cassandra replica killed, about 7 minutes with the burst and the check),
# clients (Concord cut off from Redis, the gateway node holding the sessions killed, Redis killed) or full
# (below, every kind including those two).
FAULTS_SCHEDULE ?= full
# test-faults runs the durability suite's full schedule: FAULTS_COUNT faults
# drawn from a seed (printed; FAULTS_SEED replays it) among kill -9 and
# restart of any process, network partitions between the loopback test hosts
# (one node isolated, a minority split, a one-way drop), SIGSTOP pauses and a
# Cassandra node's clock skewed with libfaketime, the guild owner's clock
# moved ±45 s through Concord's clock seam (--fault-clock-file), then the
# history checker. FAULTS_SCHEDULE=clock runs the clock fault alone.
# About 15 s per fault plus 15 s of quiet after each, and about 5 minutes
# to start and check: 9 faults (every kind once) take some 12-17 minutes. Needs root
# (iptables, cgroups). The replicated servers stay up afterwards, as the
# test servers do: bash hack/replicated.sh stop.
FAULTS_COUNT ?= 9
FAULTS_SEED ?=
test-faults: test-deps
	bash hack/replicated.sh start
	. $(CACHE)/test-env.sh && . $(CACHE)/replicated/env.sh && \
		CONCORD_FAULTS_SCHEDULE=$(FAULTS_SCHEDULE) CONCORD_FAULTS_COUNT=$(FAULTS_COUNT) CONCORD_FAULTS_SEED=$(FAULTS_SEED) \
		$(GO) test -tags faults -count=1 -timeout 45m -v ./test/faults/

# test-unit runs only the tests that need no external server, without the
# heavy ones (-short).
test-unit:
	$(GO) test -short $(GOTESTFLAGS) ./...

bench:
	bash hack/bench.sh

# cluster-up starts a real single-node Kubernetes (kubelet, containerd, the
# control plane) in its own mount and network namespaces, with the concord
# images imported; cluster-down stops it and leaves nothing on the host.
# test-e2e installs the chart on it and runs test/kube (build tag e2e).
NODE_DIR ?= /tmp/concord-node
cluster-up: test-deps
	CONCORD_NODE_DIR=$(NODE_DIR) bash hack/node/up.sh

cluster-down:
	CONCORD_NODE_DIR=$(NODE_DIR) bash hack/node/down.sh

# cluster-images rebuilds the concord and concord-operator images from this
# checkout into the running node (new tags; test-e2e picks them up).
cluster-images:
	CONCORD_NODE_DIR=$(NODE_DIR) bash hack/node/images.sh

test-e2e:
	. $(CACHE)/test-env.sh && . $(NODE_DIR)/env.sh && $(GO) test -tags e2e $(GOTESTFLAGS) ./test/kube/

# test-e2e-short is the part of test/kube that make test runs: a node of its
# own (or the one up in NODE_DIR), a few scenarios, the node stopped again.
# It fails, never skips, when the node binaries are not cached
# (hack/node/short.sh; docs/operations.md).
test-e2e-short:
	CONCORD_NODE_DIR=$(NODE_DIR) bash hack/node/short.sh

# lint-fast is formatting and vet; lint adds staticcheck and govulncheck
# (the vulnerability database from the Go module proxy, hack/vulncheck.sh).
# make test runs lint: a finding of either fails CI.
lint-fast:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

lint: lint-fast
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...
	GO=$(GO) bash hack/vulncheck.sh

generate: web
	bash hack/generate.sh
	bash hack/proto.sh

# web bundles web/src with esbuild's Go API into web/dist (no Node needed);
# a test in ./web fails when the committed bundle is stale.
web:
	$(GO) generate ./web

clean:
	rm -rf $(BIN)
