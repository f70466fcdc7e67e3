#!/usr/bin/env bash
# Prints one sha256 per (model, weights, path, mode) of the logits g4 computes on the shared
# fixtures, and of greedy generations: a refactor that must not change a bit compares this
# output before and after (`diff`). The reference loops, the SIMD kernels on 2 threads with
# each KV dtype, re-encoded weights and GGUF block formats are all covered.
# usage: scripts/output-digest.sh [G4_BINARY] > digest.txt   (default build/g4)
set -euo pipefail
cd "$(dirname "$0")/.."
G4="${1:-build/g4}"
FIX="${G4_FIXTURES:-../shared/fixtures/gemma4-tiny}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

digest() {  # name, then g4 logits arguments
  local name="$1"; shift
  "$G4" logits "$@" --out "$WORK/l.f32" >/dev/null 2>"$WORK/err" || { echo "$name FAILED"; cat "$WORK/err" >&2; return; }
  echo "$name $(sha256sum "$WORK/l.f32" | cut -c1-16)"
}

for variant in tiny-e tiny-31b tiny-moe; do
  dir="$FIX/$variant"
  tokens="$(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['sequences']; print(','.join(str(t) for q in s for t in q['tokens']))" "$dir/expected.json")"
  for type in q8_0 q4_0 q4_k_m bf16; do
    "$G4" quantize "$dir/hf" "$WORK/$variant-$type.gguf" --type "$type" >/dev/null 2>&1
  done
  digest "$variant hf full-reference" --model "$dir/hf" --tokens "$tokens"
  digest "$variant hf chunked-reference" --model "$dir/hf" --tokens "$tokens" --mode chunked --chunk 7
  for kv in f32 f16 bf16 int8; do
    digest "$variant hf simd-chunked kv=$kv" --model "$dir/hf" --tokens "$tokens" --mode chunked --chunk 7 --threads 2 --kv "$kv"
  done
  digest "$variant hf simd-incremental" --model "$dir/hf" --tokens "$tokens" --mode incremental --threads 2
  for w in q8 q4; do
    digest "$variant hf simd --weights $w" --model "$dir/hf" --tokens "$tokens" --mode chunked --chunk 16 --threads 2 --weights "$w"
  done
  for type in q8_0 q4_0 q4_k_m bf16; do
    f="$WORK/$variant-$type.gguf"
    digest "$variant $type chunked-reference" --model "$f" --tokens "$tokens" --mode chunked --chunk 64
    digest "$variant $type simd-chunked" --model "$f" --tokens "$tokens" --mode chunked --chunk 9 --threads 2
    digest "$variant $type simd-incremental" --model "$f" --tokens "$tokens" --mode incremental --threads 2
    digest "$variant $type simd-chunked compute=f32" --model "$f" --tokens "$tokens" --mode chunked --chunk 64 --threads 2 --compute f32
  done
  gen="$("$G4" generate --model "$dir/model.gguf" --tokens "${tokens%%,*},5,9,13" -n 24 --threads 2 2>/dev/null | tr -d '\n')"
  echo "$variant gguf generate-greedy $(echo "$gen" | sha256sum | cut -c1-16)"
done

# The kernels g4 bench says the products and the attention run on (text, compared as is).
for type in q8_0 q4_0 q4_k_m bf16; do
  "$G4" bench --model "$WORK/tiny-moe-$type.gguf" --prompt-len 16 --gen 4 --depth 0 --repeat 1 --threads 2 2>/dev/null |
    grep -E '^  (weight products|attention) ' | sed "s/^/tiny-moe $type bench:/"
done
