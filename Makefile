# Two commands matter: `make demo` and `make test`. Everything they need is
# built from the Go module proxy into .bin/ once and reused after that.

GO          ?= go
BIN         := $(CURDIR)/.bin
K8S_VERSION := v1.37.1
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Tests and the demo find kube-apiserver and etcd here.
export BRIDGE_TEST_BIN_DIR := $(BIN)

.PHONY: all build controlplane test unit e2e demo lint clean

all: build

build:
	$(GO) build -o $(BIN)/bridge ./cmd/bridge

# kube-apiserver and etcd, for tests and the demo. A cold build takes a few
# minutes; afterwards the binaries are reused until the tools module changes.
controlplane: $(BIN)/kube-apiserver $(BIN)/etcd

$(BIN)/kube-apiserver: test/tools/go.mod test/tools/go.sum
	cd test/tools && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/etcd: test/tools/go.mod test/tools/go.sum
	cd test/tools && $(GO) build -o $@ go.etcd.io/etcd/server/v3

# Unit tests with the race detector, then end-to-end tests against a real
# kube-apiserver and etcd started on loopback.
test: controlplane
	$(GO) test -race -count=1 ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /test/)

e2e: controlplane
	$(GO) test -race -count=1 -v ./test/e2e/

# Starts a throwaway control plane and the bridge with the stdout sink,
# applies, updates and deletes a few objects, and shows the stream.
demo: build controlplane
	$(GO) run ./examples/demo

lint:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf $(BIN)
