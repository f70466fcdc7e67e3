#!/usr/bin/env bash
# Soak test: `g4 serve` on a random-weight tiny-e model, on 127.0.0.1 only, under a mix of
# streaming and non-streaming requests, mid-stream disconnects, malformed requests and
# queue-overflow bursts for SECONDS (default 600), sampling its memory, file descriptors and
# threads (scripts/soak_driver.py states the pass rules). Then SIGTERM: the server must drain
# and exit 0.
#   scripts/soak.sh [SECONDS]       (uses build/g4, or $G4_BINARY; builds when missing)
#   G4_SOAK_WORKERS=64 (concurrent clients, default 6), G4_SOAK_PREFIX_MB=8 (the server's prefix cache)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-600}"
G4="${G4_BINARY:-${G4_BUILD_DIR:-build}/g4}"
[ -x "$G4" ] || scripts/build.sh g4
WORK="$(mktemp -d "${TMPDIR:-/tmp}/g4-soak.XXXXXX")"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -KILL "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

"$G4" synth --preset tiny-e --seed 7 --out "$WORK/model" >"$WORK/synth.log" 2>&1
# Small limits so that bursts overflow the queue (429) and sequences contend for batch slots.
# A small prefix cache, so that it fills and evicts during the warm-up and the memory check
# after it sees a full cache.
PREFIX_MB="${G4_SOAK_PREFIX_MB:-8}"
"$G4" serve --model "$WORK/model" --host 127.0.0.1 --port 0 --max-seqs 4 --queue 6 --ctx 1024 \
  --request-timeout 120 --drain-timeout 30 --prefix-cache-mb "$PREFIX_MB" >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 600); do
  PORT=$(grep -o '"event":"listening"[^}]*' "$WORK/serve.log" 2>/dev/null | grep -o '"port":[0-9]*' | head -1 | cut -d: -f2 || true)
  [ -n "$PORT" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/serve.log"; echo "soak: g4 serve exited during startup" >&2; exit 1; }
  sleep 0.2
done
[ -n "$PORT" ] || { echo "soak: g4 serve never logged its port" >&2; exit 1; }
for _ in $(seq 1 600); do
  python3 - "$PORT" <<'PY' && break
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=5)
c.request("GET", "/ready")
sys.exit(0 if c.getresponse().status == 200 else 1)
PY
  sleep 0.2
done
echo "== soak: g4 serve pid $SERVER_PID on 127.0.0.1:$PORT for ${SECS}s"
set +e
python3 scripts/soak_driver.py --port "$PORT" --pid "$SERVER_PID" --seconds "$SECS" --workers "${G4_SOAK_WORKERS:-6}" \
  --prefix-cache-mb "$PREFIX_MB" --report "${G4_SOAK_REPORT:-$WORK/report.json}"
rc=$?
set -e
kill -TERM "$SERVER_PID"
set +e
wait "$SERVER_PID"
src=$?
set -e
SERVER_PID=""
if [ "$src" -ne 0 ]; then
  echo "soak: g4 serve exited $src after SIGTERM (expected 0); last log lines:" >&2
  tail -n 20 "$WORK/serve.log" >&2
  rc=1
fi
n5xx=$(grep -c '"status":5[0-9][0-9]' "$WORK/serve.log" || true)
if [ "$n5xx" -ne 0 ]; then
  echo "soak: the server logged $n5xx responses with a 5xx status:" >&2
  grep '"status":5[0-9][0-9]' "$WORK/serve.log" | head -n 5 >&2
  rc=1
fi
[ "$rc" -eq 0 ] && echo "== soak passed" || echo "== soak FAILED" >&2
exit "$rc"
