#!/usr/bin/env bash
# minio.sh runs a throw-away MinIO server for the blob/minio conformance test.
#
#   eval "$(scripts/minio.sh start)"   # build if needed, start, export env
#   go test ./pkg/blob/minio/
#   scripts/minio.sh stop              # stop it and delete its data
#
# The server binary is built once into .cache/bin/minio (a few minutes).
# State (pid, data dir, log) lives in .cache/minio/. Only the export lines go
# to stdout; progress goes to stderr.
set -euo pipefail

MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/.cache/bin/minio"
STATE="$ROOT/.cache/minio"
ACCESS_KEY="codectx-test"
SECRET_KEY="codectx-test-secret"

log() { echo "minio.sh: $*" >&2; }

install() {
	if [[ -x "$BIN" ]]; then
		return
	fi
	log "building MinIO $MINIO_VERSION into .cache/bin (takes a few minutes)"
	mkdir -p "$ROOT/.cache/bin"
	(cd "$ROOT" && GOBIN="$ROOT/.cache/bin" GOFLAGS= go install "github.com/minio/minio@$MINIO_VERSION")
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	log "no free port found"
	return 1
}

running() {
	[[ -f "$STATE/pid" ]] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null
}

print_env() {
	echo "export CODECTX_TEST_MINIO_ENDPOINT=127.0.0.1:$(cat "$STATE/port")"
	echo "export CODECTX_TEST_MINIO_ACCESS_KEY=$ACCESS_KEY"
	echo "export CODECTX_TEST_MINIO_SECRET_KEY=$SECRET_KEY"
}

start() {
	if running; then
		log "already running (pid $(cat "$STATE/pid"))"
		print_env
		return
	fi
	install
	mkdir -p "$STATE"
	local data port console
	data="$(mktemp -d "$STATE/data.XXXXXX")"
	port="$(free_port)"
	console="$(free_port)"
	MINIO_ROOT_USER="$ACCESS_KEY" MINIO_ROOT_PASSWORD="$SECRET_KEY" \
		MINIO_BROWSER=off MINIO_UPDATE=off \
		nohup "$BIN" server --quiet --address "127.0.0.1:$port" \
		--console-address "127.0.0.1:$console" "$data" \
		>"$STATE/log" 2>&1 </dev/null &
	echo $! >"$STATE/pid"
	echo "$port" >"$STATE/port"
	echo "$data" >"$STATE/data"
	for _ in $(seq 1 120); do
		if curl -fsS -o /dev/null "http://127.0.0.1:$port/minio/health/ready" 2>/dev/null; then
			log "ready on 127.0.0.1:$port (pid $(cat "$STATE/pid"))"
			print_env
			return
		fi
		if ! running; then
			log "server exited; log:"
			cat "$STATE/log" >&2
			return 1
		fi
		sleep 0.5
	done
	log "not ready after 60s; log in $STATE/log"
	stop
	return 1
}

stop() {
	if [[ -f "$STATE/pid" ]]; then
		local pid
		pid="$(cat "$STATE/pid")"
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			for _ in $(seq 1 40); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.25
			done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		fi
		rm -f "$STATE/pid"
	fi
	if [[ -f "$STATE/data" ]]; then
		rm -rf "$(cat "$STATE/data")"
		rm -f "$STATE/data" "$STATE/port"
	fi
	log "stopped"
}

case "${1:-}" in
install) install ;;
start) start ;;
stop) stop ;;
env) running && print_env ;;
*)
	echo "usage: $0 install|start|stop|env" >&2
	exit 2
	;;
esac
