#!/bin/sh
# Lays out the files of the container image under OUT (an absolute or
# relative folder, made if absent), from the repository's root:
#
#   OUT/usr/local/bin/{gateway,controlplane,idn}   static binaries (CGO_ENABLED=0)
#   OUT/var/lib/idn-gateway                        the gateway's data (GATEWAY_DATA_DIR)
#   OUT/var/lib/idn-controlplane                   the control plane's data on SQLite (IDN_DATA_DIR)
#   OUT/var/lib/idn-provision                      the service API key controlplane provision writes
#
# The Dockerfile's build stage runs it, and so does CI (.ci/deploy), which
# builds the image's last stage from its output without pulling anything.
# The image gives the data folders to its unprivileged user; they exist in
# it so that a volume mounted on one starts with that owner.
#
# Each binary is built from its own module, as a user's go install would,
# not through go.work: the gateway and idn from the root module, the
# control plane from cmd/controlplane (README, "Modules"). The version the
# binaries report is VERSION when set, else git describe of the checkout,
# else dev.
#
#   sh deploy/rootfs.sh OUT
set -eu
[ $# -eq 1 ] || { echo "usage: sh deploy/rootfs.sh OUT" >&2; exit 2; }
mkdir -p "$1/usr/local/bin"
out=$(cd "$1" && pwd)
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
ldflags="-s -w -X github.com/idnhq/idn/kit/buildinfo.version=$version"
export GOWORK=off CGO_ENABLED=0
(cd cmd/gateway && go build -trimpath -ldflags "$ldflags" -o "$out/usr/local/bin/gateway" .)
go build -trimpath -ldflags "$ldflags" -o "$out/usr/local/bin/idn" ./cmd/idn
(cd cmd/controlplane && go build -trimpath -ldflags "$ldflags" -o "$out/usr/local/bin/controlplane" .)
mkdir -p -m 0700 "$out/var/lib/idn-gateway" "$out/var/lib/idn-controlplane" "$out/var/lib/idn-provision"
