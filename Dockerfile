# The bridge as a container image: the static bridge and replica binaries on
# distroless, run as a non-root user. The image runs the bridge; a pod runs
# the replica by naming /replica as its command (the chart does). Build it
# with `make image` (needs Docker); `make image-oci` builds the same image
# without Docker (cmd/bridge-image), and a test checks that the two agree on
# the lines below the second FROM.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same commands as `make build`: static (no cgo), no local paths, no
# debug symbols.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/bridge ./cmd/bridge
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/replica ./cmd/replica

# static-debian12: CA certificates and tzdata, no shell, no libc.
FROM gcr.io/distroless/static-debian12:nonroot
# A layer per binary, in this order: the image builder makes the same.
COPY --from=build /out/bridge /bridge
COPY --from=build /out/replica /replica
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="bridge" \
      org.opencontainers.image.description="Change data capture for Kubernetes: publishes every change to API objects to NATS or Kafka." \
      org.opencontainers.image.source="https://github.com/kubebus/bridge" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# nonroot (65532), by number so that Kubernetes can check runAsNonRoot.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/bridge"]
