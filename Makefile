# Two commands matter: `make demo` and `make test`. Everything they need is
# built from the Go module proxy into .bin/ once and reused after that.

GO          ?= go
BIN         := $(CURDIR)/.bin
K8S_VERSION := v1.37.1
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
HELM_VERSION := v3.22.0
HELM        := $(BIN)/helm
# helm renders for Kubernetes 1.20 unless told otherwise.
KUBE_VERSION := $(K8S_VERSION:v%=%)
IMAGE       ?= ghcr.io/kubebus/bridge:dev
# The image's labels and creation time, from git when there is one. The
# commit's time as the creation time makes the image reproducible.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
# The image's architecture, as GOARCH names it: the host's unless told.
IMAGE_ARCH  ?= $(shell $(GO) env GOARCH)
# Tests and the demo find kube-apiserver and etcd here.
export BRIDGE_TEST_BIN_DIR := $(BIN)
# The replica's test with the Python client runs Debian's python3, which
# has python3-kubernetes, not whichever python3 comes first on PATH.
export BRIDGE_TEST_PYTHON ?= /usr/bin/python3

.PHONY: all build image image-oci controlplane helm pyclient chart-lint test unit e2e demo bench lint clean

all: build

# Static binaries, built exactly as the Dockerfile builds them.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/bridge ./cmd/bridge
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/replica ./cmd/replica

# The container image (needs Docker): the static bridge and replica on
# distroless, as a non-root user.
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

# The same image without Docker: the static binaries for Linux, and the
# files distroless gives them, written as an OCI layout in .bin/image and a
# tarball for `docker load` or `podman load` in .bin/image.tar.
image-oci:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/linux/bridge ./cmd/bridge
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/linux/replica ./cmd/replica
	$(GO) run ./cmd/bridge-image -binary $(BIN)/linux/bridge -replica $(BIN)/linux/replica \
		-zoneinfo "$$($(GO) env GOROOT)/lib/time/zoneinfo.zip" \
		-out $(BIN)/image -tar $(BIN)/image.tar -tag $(IMAGE) \
		-version "$(VERSION)" -revision "$(REVISION)" -created "$(SOURCE_DATE_EPOCH)"

# kube-apiserver and etcd, for tests and the demo. A cold build takes a few
# minutes; afterwards the binaries are reused until the tools module changes.
controlplane: $(BIN)/kube-apiserver $(BIN)/etcd

$(BIN)/kube-apiserver: test/tools/go.mod test/tools/go.sum
	cd test/tools && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/etcd: test/tools/go.mod test/tools/go.sum
	cd test/tools && $(GO) build -o $@ go.etcd.io/etcd/server/v3

# helm, for the chart's lint and tests, built from the module proxy (a few
# minutes cold). The version stamp makes a new HELM_VERSION rebuild it.
helm: $(HELM)

$(HELM): $(BIN)/.helm-$(HELM_VERSION)
	GOBIN=$(BIN) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	@touch $@

$(BIN)/.helm-$(HELM_VERSION):
	@mkdir -p $(BIN)
	@rm -f $(BIN)/.helm-*
	@touch $@

# The Python client of the Kubernetes API (python3-kubernetes, from
# Debian's packages), which the replica's test runs against the replica.
# Nothing to do when Debian's python3 imports it already; otherwise an
# install as root, non-interactive, with apt-get update only when the
# package lists do not have it yet.
pyclient:
	@$(BRIDGE_TEST_PYTHON) -c 'import kubernetes' 2>/dev/null || { \
		export DEBIAN_FRONTEND=noninteractive; \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$sudo apt-get install -y -q --no-install-recommends python3-kubernetes || \
		{ $$sudo apt-get update -q && $$sudo apt-get install -y -q --no-install-recommends python3-kubernetes; } && \
		$(BRIDGE_TEST_PYTHON) -c 'import kubernetes'; }

chart-lint: $(HELM)
	$(HELM) lint --strict --kube-version $(KUBE_VERSION) charts/bridge
	@for f in charts/bridge/ci/*-values.yaml; do \
		echo "$(HELM) lint --strict --kube-version $(KUBE_VERSION) charts/bridge -f $$f"; \
		$(HELM) lint --strict --kube-version $(KUBE_VERSION) --quiet charts/bridge -f $$f || exit 1; \
	done

# Unit tests with the race detector, then end-to-end tests against a real
# kube-apiserver and etcd started on loopback, and the chart's tests (with
# helm, and against a kube-apiserver too); then test/outside, a module of
# its own that uses the public API as another module would.
test: controlplane helm pyclient
	$(GO) test -race -count=1 -timeout 45m ./...
	cd test/outside && $(GO) test -race -count=1 ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/)

e2e: controlplane pyclient
	$(GO) test -race -count=1 -timeout 45m -v ./test/e2e/

# Starts a throwaway control plane and the bridge with the stdout sink,
# applies, updates and deletes a few objects, and shows the stream.
demo: build controlplane
	$(GO) run ./examples/demo

# The benchmark suite: throughput, latency, memory, restart cost, the API
# server's cost of 1 to 50 informers through the bus, a start watching
# everything (BRIDGE_RESOURCES=*) on 120,000 objects, and a reconcile pass
# on 50,000 objects next to a LIST of them and to the bridge's restart,
# each next to a baseline measured in the same run, plus the hot path's
# micro-benchmarks; writes docs/benchmarks.md. Not part of `make test`.
bench: build controlplane
	$(GO) run ./test/bench/cmd/benchreport -out docs/benchmarks.md

lint: chart-lint
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd test/outside && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf $(BIN)
