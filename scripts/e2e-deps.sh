#!/usr/bin/env bash
# e2e-deps.sh builds the servers of the distributed end-to-end test
# (services/codectx/e2e_test.go) into .cache/bin once: the Temporal CLI dev
# server (about 3.5 minutes to build) and nats-server (seconds). MinIO is
# built by scripts/minio.sh. Later runs find them cached and do nothing.
set -euo pipefail

TEMPORAL_CLI_VERSION="v1.5.1"
NATS_SERVER_VERSION="v2.15.3"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.cache/bin"

build() {
	local name="$1" pkg="$2"
	if [[ -x "$BIN/$name" ]]; then
		return
	fi
	echo "e2e-deps.sh: building $pkg into .cache/bin" >&2
	mkdir -p "$BIN"
	(cd "$ROOT" && GOBIN="$BIN" GOFLAGS= go install "$pkg")
}

build temporal "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION"
build nats-server "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
