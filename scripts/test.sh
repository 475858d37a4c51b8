#!/usr/bin/env bash
# Runs the whole test suite. Servers the tests need are started here:
# NATS runs in-process inside the tests; MinIO is built (cached under
# .cache/bin) and started on loopback by scripts/minio.sh when available.
set -euo pipefail
cd "$(dirname "$0")/.."
# Under CI=true a MinIO that fails to build or start fails the run (the
# MinIO tests would otherwise skip and CI stay green without them).
if [ -x scripts/minio.sh ] && [ "${CODECTX_SKIP_MINIO:-}" = "" ]; then
  trap 'scripts/minio.sh stop >/dev/null 2>&1 || true' EXIT
  if minio_env="$(scripts/minio.sh start)" && [ -n "$minio_env" ]; then
    eval "$minio_env"
  elif [ "${CI:-}" = "true" ]; then
    echo "test.sh: MinIO did not start (CI=true: failing the run)" >&2
    exit 1
  else
    echo "test.sh: MinIO did not start; its tests will skip" >&2
  fi
fi
# The servers of the distributed end-to-end test (cached under .cache/bin;
# about 4 minutes on a fresh clone). Under CI=true a failed build fails
# the run; elsewhere the test skips without them.
if [ "${CODECTX_SKIP_E2E:-}" = "" ]; then
  if ! scripts/e2e-deps.sh && [ "${CI:-}" = "true" ]; then
    echo "test.sh: the end-to-end servers did not build (CI=true: failing the run)" >&2
    exit 1
  fi
fi
# The default embedding model and the ONNX Runtime library (cached under
# .cache; about 20-35 s on a fresh clone) so the ONNX driver's conformance
# test and the tokenizer's reference check run for real.
if [ "${CODECTX_SKIP_MODEL:-}" = "" ]; then
  scripts/fetch-model.sh
fi
go test -count=1 ./...
