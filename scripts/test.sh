#!/usr/bin/env bash
# Runs the whole test suite. Servers the tests need are started here:
# NATS runs in-process inside the tests; MinIO is built (cached under
# .cache/bin) and started on loopback around the run by
# scripts/with-minio.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
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
# MinIO is started around the run (scripts/with-minio.sh); the packages
# run with the services package in two processes (scripts/test-packages.sh).
scripts/with-minio.sh scripts/test-packages.sh
