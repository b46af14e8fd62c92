# Builds both servers as static binaries and ships them in a distroless
# image: no shell, no package manager, running as an unprivileged user
# (UID 65532, distroless's nonroot).
#
#   docker build -t idn .
#   docker run --rm idn --help
#   docker run --rm --entrypoint /usr/local/bin/gateway idn --help
#
# The entrypoint is the control plane; compose.yaml runs the gateway with
# the entrypoint above. Base images are named in full (docker.io/…,
# gcr.io/…), so podman builds without an unqualified-search registry.
#
# compose.yaml runs the control plane on PostgreSQL beside a gateway.
#
# The files the image adds are laid out by deploy/rootfs.sh, which the
# build stage runs. CI, which can pull no base image, runs the same script
# on the host and builds the last stage from its output, on an empty base
# (.ci/deploy):
#
#   sh deploy/rootfs.sh /tmp/rootfs
#   podman build --build-arg ROOTFS=prebuilt --build-arg BASE=scratch -f Dockerfile /tmp/rootfs

# BASE is the last stage's base: distroless gives the unprivileged user a
# passwd entry, CA certificates (upstreams over HTTPS) and time zones.
ARG BASE=gcr.io/distroless/static-debian12:nonroot
# ROOTFS names the stage the image's files come from: build (compiled
# here) or prebuilt (the build context is deploy/rootfs.sh's output).
ARG ROOTFS=build

FROM docker.io/library/golang:1.26-bookworm AS build
WORKDIR /src
ENV GOWORK=off
COPY go.mod go.sum ./
COPY httpsig/go.mod httpsig/go.sum httpsig/
COPY controlplane/go.mod controlplane/go.sum controlplane/
COPY registry/evm/go.mod registry/evm/go.sum registry/evm/
COPY cmd/controlplane/go.mod cmd/controlplane/go.sum cmd/controlplane/
RUN go mod download && cd cmd/controlplane && go mod download
COPY . .
# The version the binaries report (--version, /health): VERSION when
# given (docker build --build-arg VERSION=v1.2.3), else git describe of
# the context's checkout, else "dev".
ARG VERSION=
RUN VERSION="${VERSION}" sh deploy/rootfs.sh /out

FROM scratch AS prebuilt
COPY . /out/

FROM ${ROOTFS} AS rootfs

FROM ${BASE}
COPY --from=rootfs /out/usr/local/bin/ /usr/local/bin/
# The data folders belong to the unprivileged user, so a volume mounted
# on one (compose.yaml mounts two) starts writable by it.
COPY --from=rootfs --chown=65532:65532 /out/var/lib/ /var/lib/
ENV GATEWAY_DATA_DIR=/var/lib/idn-gateway IDN_DATA_DIR=/var/lib/idn-controlplane
VOLUME ["/var/lib/idn-gateway", "/var/lib/idn-controlplane"]
USER 65532:65532
EXPOSE 38100 8787
ENTRYPOINT ["/usr/local/bin/controlplane"]
