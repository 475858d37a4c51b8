#!/usr/bin/env bash
# Bounded schemathesis run against a real `codectx up` on loopback, keys on,
# as a tenant's key, beside another tenant's repository of the same name
# whose marker no answer may hold: every operation of GET /v1/openapi.json is
# fuzzed (MCP excluded: JSON-RPC, tested with the SDK's own client). Any 5xx,
# any answer that breaks the document, a wrong status for a missing key or
# an undeclared method fails it. Installs schemathesis into .cache (a venv).
# Arguments are passed to schemathesis run (e.g. --report har). Each
# operation must have answered 2xx at least once.
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
# The repository the document's examples name (shop: cart.go, Total).
mkdir -p "$WORK/shop"
cat > "$WORK/shop/cart.go" <<'GO'
package shop

// Item is a line of a cart.
type Item struct{ Price, Qty int }

// Total returns the cart total: each item's price times its quantity.
func Total(items []Item) int {
	sum := 0
	for _, it := range items {
		sum += it.Price * it.Qty
	}
	return sum
}
GO
cat > "$WORK/shop/checkout.go" <<'GO'
package shop

import "fmt"

// Receipt prints the total of a checkout.
func Receipt(items []Item) string { return fmt.Sprintf("total %d", Total(items)) }
GO
git -C "$WORK/shop" init -q
git -C "$WORK/shop" add .
git -C "$WORK/shop" -c user.email=ci@example.com -c user.name=ci commit -qm init
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# A rate well above the default: every request is charged, refused ones
# too, and at 50 a second the fuzz's 400s left a third of its queries
# answered 429, not handled (the rate has its own tests).
"$WORK/codectx" up --data "$WORK/data" --listen "127.0.0.1:$PORT" --keys --rate-limit 500 --rate-burst 1000 --index "$WORK/shop" >"$WORK/up.out" 2>"$WORK/up.err" &
UP_PID=$!
for _ in $(seq 1 120); do
  grep -q '^indexed ' "$WORK/up.out" 2>/dev/null && break
  kill -0 "$UP_PID" 2>/dev/null || { cat "$WORK/up.err"; exit 1; }
  sleep 1
done
grep -q '^indexed ' "$WORK/up.out" || { echo "up did not index"; cat "$WORK/up.out" "$WORK/up.err"; exit 1; }
OPERATOR=$(cat "$WORK/data/admin.key")
# Tenant beta holds a repository named like the fuzzed tenant's, whose
# code carries a marker: no answer to the fuzzed tenant may hold it.
MARKER=BetaLedgerSecret7f3a
mkdir -p "$WORK/beta/shop"
cat > "$WORK/beta/shop/cart.go" <<GO
package shop

// Total is beta's $MARKER.
func Total() int { return 1 }

// $MARKER posts beta's ledger entry.
func $MARKER(amount int) int { return amount }
GO
git -C "$WORK/beta/shop" init -q
git -C "$WORK/beta/shop" add .
git -C "$WORK/beta/shop" -c user.email=ci@example.com -c user.name=ci commit -qm init
python3 - "http://127.0.0.1:$PORT" "$OPERATOR" "$WORK/beta/shop" <<'PY'
import json, sys, time, urllib.request
base, key, location = sys.argv[1:]
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)
call("POST", "/v1/index", {"tenant": "beta", "repo": "shop", "location": location})
for _ in range(120):
    st = call("GET", "/v1/repos/beta/shop/status")
    if st.get("last_error"):
        sys.exit("beta/shop: " + st["last_error"])
    if st.get("last_commit"):
        break
    time.sleep(0.5)
else:
    sys.exit("beta/shop was not indexed in 60 s")
PY
# The fuzz acts as tenant default (the document's examples name its shop),
# with a key of scope admin: what a hostile tenant may send.
KEY=$("$WORK/codectx" key create --tenant default --scope admin --data "$WORK/data" 2>/dev/null)
start=$(date +%s)
# From the scratch dir: schemathesis keeps a cache in its working
# directory, and reads its configuration (scripts/schemathesis.toml) there.
cp scripts/schemathesis.toml "$WORK/schemathesis.toml"
fuzz() { # report seconds args...
  local report=$1 seconds=$2
  shift 2
  (cd "$WORK" && "$ROOT/$VENV/bin/schemathesis" run "http://127.0.0.1:$PORT/v1/openapi.json" \
    -H "Authorization: Bearer $KEY" --exclude-path /v1/mcp \
    -n "${SCHEMATHESIS_EXAMPLES:-10}" --max-time "$seconds" --seed 1 \
    --request-timeout 10 --no-color --report ndjson --report-ndjson-path "$WORK/$report" "$@")
}
# DELETE runs last: its example (the document's) deletes the indexed
# repository, and every query after that is a 404 (in one run with it,
# 3 queries of 139 were answered).
fuzz run.ndjson "${SCHEMATHESIS_SECONDS:-45}" --exclude-operation-id deleteRepo "$@"
fuzz delete.ndjson 10 --include-operation-id deleteRepo "$@"
echo "schemathesis: $(( $(date +%s) - start ))s of fuzzing"
# Each operation must have reached its handler's work at least once (a
# 2xx answer), or the fuzz only tested the refusals: before the request
# schemas held the handlers' rules, none of 261 generated queries did.
# No answer may hold tenant beta's marker.
python3 - "$MARKER" "$WORK/run.ndjson" "$WORK/delete.ndjson" <<'PY'
import base64, collections, json, sys
marker = sys.argv[1].encode()
statuses = collections.defaultdict(collections.Counter)
leaks = []
for line in (l for path in sys.argv[2:] for l in open(path)):
    event = json.loads(line)
    done = event.get("ScenarioFinished")
    if not done:
        continue
    recorder = done.get("recorder") or {}
    for it in (recorder.get("interactions") or {}).values():
        resp = it.get("response")
        if not resp:
            continue
        statuses[recorder["label"]][resp["status_code"]] += 1
        content = resp.get("content") or {}
        body = base64.b64decode(content["$base64"]) if "$base64" in content else json.dumps(content).encode()
        if marker in body or marker in json.dumps(resp.get("headers")).encode():
            leaks.append(f'{recorder["label"]} {it.get("request", {}).get("uri", "")}')
failed = []
for op in sorted(statuses):
    counts = statuses[op]
    ok = sum(n for code, n in counts.items() if 200 <= code < 300)
    print(f"{op}: {sum(counts.values())} requests, {ok} answered 2xx, {dict(sorted(counts.items()))}")
    # A webhook delivery needs its sender's signature; metrics an operator's key.
    if ok == 0 and op not in ("POST /v1/webhooks/{host}/{tenant}", "GET /metrics"):
        failed.append(op)
if leaks:
    sys.exit(f"schemathesis: {len(leaks)} answers hold tenant beta's code: " + "; ".join(leaks[:5]))
if failed:
    sys.exit("schemathesis: no request reached the work of " + ", ".join(failed))
PY
