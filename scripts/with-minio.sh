#!/usr/bin/env bash
# with-minio.sh runs a command with a MinIO on loopback (built, cached under
# .cache/bin, and started by scripts/minio.sh) and its CODECTX_TEST_MINIO_*
# variables exported, then stops it: the test and race runs of make check
# both use it, so the MinIO tests run in each.
# Under CI=true a MinIO that fails to build or start fails the run (the
# MinIO tests would otherwise skip and CI stay green without them);
# CODECTX_SKIP_MINIO=1 runs the command without one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x scripts/minio.sh ] && [ "${CODECTX_SKIP_MINIO:-}" = "" ]; then
  trap 'scripts/minio.sh stop >/dev/null 2>&1 || true' EXIT
  if minio_env="$(scripts/minio.sh start)" && [ -n "$minio_env" ]; then
    eval "$minio_env"
  elif [ "${CI:-}" = "true" ]; then
    echo "with-minio.sh: MinIO did not start (CI=true: failing the run)" >&2
    exit 1
  else
    echo "with-minio.sh: MinIO did not start; its tests will skip" >&2
  fi
fi
"$@"
