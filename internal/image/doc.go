// Package image builds the bridge's container image without Docker: the
// static bridge and replica binaries on a root filesystem that holds what
// the distroless static "nonroot" base image gives them, and nothing more.
//
// What an image from [Build] guarantees:
//
//   - It runs /bridge as 65532:65532 (the user "nonroot", by number so that
//     Kubernetes can check runAsNonRoot), from /home/nonroot, which that user
//     owns. It exposes 9090/tcp, the metrics and probes port.
//   - It holds /replica beside /bridge, the replica (cmd/replica), which a
//     pod runs by naming it as its command. Both are root's, mode 0755:
//     nonroot runs them and cannot change them.
//   - It has no shell, no libc and no other executable than /bridge and
//     /replica. Build refuses a binary that is not a static Linux
//     executable (see [CheckStatic]) and two binaries for different
//     architectures, and takes the image's platform from them.
//   - It holds /etc/passwd, /etc/group and /etc/nsswitch.conf as distroless
//     has them, a /tmp for everyone, the CA roots in
//     /etc/ssl/certs/ca-certificates.crt and the time zone database in
//     /usr/share/zoneinfo.
//   - Its labels follow the OCI conventions (org.opencontainers.image.*), and
//     are those the Dockerfile sets.
//   - The same binaries and [Options] give the same digest: file times, owners
//     and order are fixed, and the only time in the image is Options.Created.
//
// Where the files come from, so that they stay maintained without a base
// image:
//
//   - The CA roots are Mozilla's (NSS), as golang.org/x/crypto/x509roots/
//     fallback/bundle carries them: the Go team's module, updated with each
//     NSS release. A PEM file cannot carry NSS's "distrust after" dates, so
//     the few roots that have one are left out rather than trusted without it.
//   - The time zone database is the Go tree's lib/time/zoneinfo.zip, updated
//     with each Go release. The bridge itself reads no time zone, but a CEL
//     filter may (timestamp.getHours("Europe/Paris")), and distroless has the
//     database: unpacking it where Go looks first keeps the binary the same as
//     the Dockerfile's, which embedding time/tzdata would not.
package image
