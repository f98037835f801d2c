# The bridge as a container image: a static binary on distroless, run as a
# non-root user. Build it with `make image` (needs Docker).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same command as `make build`: static (no cgo), no local paths, no
# debug symbols.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/bridge ./cmd/bridge

# static-debian12: CA certificates and tzdata, no shell, no libc.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bridge /bridge
# nonroot (65532), by number so that Kubernetes can check runAsNonRoot.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/bridge"]
