#!/usr/bin/env bash
# test-packages.sh runs go test over every package, with the services
# package (about 10 minutes alone, most of it waiting on the servers its
# tests start, and the one that set the length of the whole run) split in
# two processes beside the others: its audit and end-to-end tests in one,
# every other test in the second, so that a new test runs in the second
# by default. Run by scripts/test.sh inside scripts/with-minio.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
svc=./services/codectx
first='^(TestAudit|TestDistributedEndToEnd)'
mapfile -t others < <(go list ./... | grep -v '/services/codectx$')
# The services package starts codectx up some hundred times: past go
# test's default 10-minute bound on a busy machine.
args=(-count=1 -timeout 25m)
pids=()
go test "${args[@]}" "${others[@]}" & pids+=($!)
go test "${args[@]}" -run "$first" "$svc" & pids+=($!)
go test "${args[@]}" -skip "$first" "$svc" & pids+=($!)
rc=0
for p in "${pids[@]}"; do
  wait "$p" || rc=1
done
exit "$rc"
