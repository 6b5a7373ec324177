#!/usr/bin/env bash
# usage: scripts/with-stage-server.sh DIR PORT CMD...
# Serves DIR over HTTP on 127.0.0.1:PORT while CMD runs (a `docker build --network host`), so
# RUN steps install staged wheels/.debs without copying them into any image layer.
set -euo pipefail
dir=${1:?DIR}; port=${2:?PORT}; shift 2
mkdir -p "$dir"
${PYTHON:-python3} -m http.server --bind 127.0.0.1 "$port" --directory "$dir" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  kill -0 "$pid" 2>/dev/null || { echo "stage server failed (port $port busy? set STAGE_PORT):" >&2; cat "$dir/server.log" >&2; exit 1; }
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
"$@"
