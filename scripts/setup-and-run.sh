#!/usr/bin/env bash
# README command 1: install dependencies, build the g4 binary (only it: the tests and benchmarks
# are README command 2's), make a small random-weight Gemma 4 model with `g4 synth` (nothing is
# downloaded) and run g4 on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh g4
G4=build/g4
MODEL=models/tiny-e
echo "== g4 synth: a random-weight Gemma 4 (E2B-like, tiny) with its own tokenizer in $MODEL"
$G4 synth --preset tiny-e --seed 1 --out "$MODEL"
echo "== g4 info"
$G4 info --model "$MODEL"
echo "== g4 generate (random weights: the text is noise by design; the degeneracy guard's verdict ends the log line, and short noise is usually ok: noise is not a loop)"
$G4 generate --model "$MODEL" --chat --prompt "Write a haiku about the sea." -n 48 --temperature 0.8 --seed 7
echo "== g4 serve: the OpenAI-compatible server on 127.0.0.1, answering one chat request (noise again; the guard's verdict is in g4.degeneracy)"
LOG=$(mktemp)
$G4 serve --model "$MODEL" --port 0 --ready-interval 0 2>"$LOG" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
PORT=""
for _ in $(seq 1 600); do
  PORT=$(sed -n 's/.*"event":"listening".*"port":\([0-9]*\).*/\1/p' "$LOG" | head -1)
  [ -n "$PORT" ] && curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null && break
  sleep 0.1
done
[ -n "$PORT" ] || { cat "$LOG"; exit 1; }
curl -sf "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "tiny-e", "messages": [{"role": "user", "content": "Write a haiku about the sea."}], "max_tokens": 32}'
echo
kill -TERM $SERVER && wait $SERVER
trap - EXIT
grep '"event":"request"' "$LOG" | tail -1
rm -f "$LOG"
