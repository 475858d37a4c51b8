#!/bin/sh
# Regenerates pkg/vector/local/testdata/bge-small-codectx.f16: vectors of
# the default model (make model) for this repository's own chunks and for
# the first sentence of its doc comments as queries (vectors only, no
# text). About 80 s of both cores. With a directory argument it embeds
# that tree's code instead, up to MAX chunks (default 20000), into OUT,
# for a measurement whose vectors are not committed:
#   scripts/vector-fixture.sh [DIR OUT [MAX]]
# then CODECTX_RECALL_TABLE=1 CODECTX_VECTOR_FIXTURE=OUT go test -run TestRecallTable -v ./pkg/vector/local/
set -eu
cd "$(dirname "$0")/.."
if [ $# -ge 2 ]; then
	export CODECTX_VECTOR_SOURCE="$1" CODECTX_VECTOR_OUT="$2" CODECTX_VECTOR_MAX="${3:-20000}"
fi
CODECTX_WRITE_VECTORS=1 exec nice go test -count=1 -timeout 120m -run '^TestWriteFixture$' -v ./pkg/vector/local/
