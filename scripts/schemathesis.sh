#!/usr/bin/env bash
# Bounded schemathesis run against a real `codectx up` on loopback, keys on,
# one small repository indexed: every operation of GET /v1/openapi.json is
# fuzzed (MCP excluded: JSON-RPC, tested with the SDK's own client). Any 5xx,
# any answer that breaks the document, a wrong status for a missing key or
# an undeclared method fails it. Installs schemathesis into .cache (a venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=.cache/schemathesis
VERSION=4.32.5
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$VERSION"; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "schemathesis==$VERSION"
fi
WORK=$(mktemp -d)
UP_PID=""
cleanup() {
  if [ -n "$UP_PID" ]; then kill "$UP_PID" 2>/dev/null || true; wait "$UP_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
go build -o "$WORK/codectx" ./services/codectx
mkdir -p "$WORK/repo"
printf 'package calc\n\n// Add returns the sum of two numbers.\nfunc Add(a, b int) int { return a + b }\n' > "$WORK/repo/calc.go"
git -C "$WORK/repo" init -q
git -C "$WORK/repo" add .
git -C "$WORK/repo" -c user.email=ci@example.com -c user.name=ci commit -qm init
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$WORK/codectx" up --data "$WORK/data" --listen "127.0.0.1:$PORT" --keys --index "$WORK/repo" >"$WORK/up.out" 2>"$WORK/up.err" &
UP_PID=$!
for _ in $(seq 1 120); do
  grep -q '^indexed ' "$WORK/up.out" 2>/dev/null && break
  kill -0 "$UP_PID" 2>/dev/null || { cat "$WORK/up.err"; exit 1; }
  sleep 1
done
grep -q '^indexed ' "$WORK/up.out" || { echo "up did not index"; cat "$WORK/up.out" "$WORK/up.err"; exit 1; }
KEY=$(cat "$WORK/data/admin.key")
start=$(date +%s)
# positive_data_acceptance is left out: the API validates more than a schema
# can say (repo or repos, a non-empty query, a reachable location) and
# answers that with a documented 400.
# From the scratch dir: schemathesis keeps a cache in its working directory.
(cd "$WORK" && "$ROOT/$VENV/bin/schemathesis" run "http://127.0.0.1:$PORT/v1/openapi.json" \
  -H "Authorization: Bearer $KEY" --exclude-path /v1/mcp \
  --exclude-checks positive_data_acceptance \
  -n "${SCHEMATHESIS_EXAMPLES:-10}" --max-time "${SCHEMATHESIS_SECONDS:-45}" --seed 1 \
  --request-timeout 10 --no-color)
echo "schemathesis: $(( $(date +%s) - start ))s of fuzzing"
