# Builds both servers as static binaries and ships them in a distroless
# image: no shell, no package manager, running as an unprivileged user.
#
#   docker build -t idn .
#   docker run --rm idn gateway --help
#   docker run --rm idn controlplane --help
#
# compose.yaml runs the control plane on PostgreSQL beside a gateway.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Each binary is built from its own module, as a user's go install would,
# not through go.work: the gateway and idn from the root module,
# the control plane from cmd/controlplane (README, "Modules").
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
# modernc.org/sqlite is pure Go, so CGO_ENABLED=0 gives a static binary.
RUN VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}" && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/idnhq/idn/internal/buildinfo.version=${VERSION}" \
      -o /out/gateway ./cmd/gateway && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/idnhq/idn/internal/buildinfo.version=${VERSION}" \
      -o /out/idn ./cmd/idn && \
    cd cmd/controlplane && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/idnhq/idn/internal/buildinfo.version=${VERSION}" \
      -o /out/controlplane .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
# Data directories default under $HOME; the nonroot user's home is
# /home/nonroot. Mount a volume there (compose.yaml does) to keep data.
ENV HOME=/home/nonroot
USER nonroot:nonroot
EXPOSE 38100 8787
ENTRYPOINT ["/usr/local/bin/controlplane"]
