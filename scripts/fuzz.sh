#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ (clang, ASan + UBSan + libFuzzer, into build-fuzz/) and
# runs each for SECONDS (default 60) from its seed corpus in fuzz/corpus/<target>/.
#   scripts/fuzz.sh [SECONDS]             all targets
#   G4_FUZZ_TARGETS="gguf config" scripts/fuzz.sh 600
# New inputs go to build-fuzz/corpus/<target>/ (kept between runs, never committed); a crash,
# sanitizer report, leak, timeout (>10 s on one input), single allocation over 512 MiB or RSS
# over 2 GiB stops that target, leaves its input in build-fuzz/artifacts/<target>/, and makes
# the script fail. Reproduce one input: build-fuzz/<target>_fuzz FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
BUILD_DIR="${G4_FUZZ_BUILD_DIR:-build-fuzz}"
TARGETS="${G4_FUZZ_TARGETS:-safetensors gguf config tokenizer_json chat_template tokenizer_encode openai_request grammar image_decode data_url}"
JOBS="${G4_JOBS:-$(nproc)}"

# Longest input per target: a header, a config or a request is small; tokenizer.json and GGUF
# metadata seeds are ~30 KB; 16 KB holds small images of every format with room to grow.
max_len() {
  case "$1" in
    tokenizer_json | gguf) echo 65536 ;;
    safetensors) echo 16384 ;;
    tokenizer_encode | grammar) echo 4096 ;;
    image_decode) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
  -DG4_FUZZ=ON -DG4_BUILD_TESTS=OFF -DG4_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target $(for t in $TARGETS; do printf '%s_fuzz ' "$t"; done)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
summary=()
for t in $TARGETS; do
  work="$BUILD_DIR/corpus/$t"
  art="$BUILD_DIR/artifacts/$t"
  log="$BUILD_DIR/fuzz-$t.log"
  mkdir -p "$work" "$art"
  echo "== fuzz $t for ${SECS}s (max_len $(max_len "$t"))"
  set +e
  "$BUILD_DIR/${t}_fuzz" -max_total_time="$SECS" -max_len="$(max_len "$t")" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 -artifact_prefix="$art/" \
    "$work" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  line="$t: rc=$rc execs=${execs:-?} ${cov:-cov: ?} corpus=$(ls "$work" | wc -l)"
  summary+=("$line")
  echo "   $line"
  if [ "$rc" -ne 0 ]; then
    failed+=("$t")
    tail -n 60 "$log"
  fi
done
echo "== fuzz summary (${SECS}s per target)"
printf '   %s\n' "${summary[@]}"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $BUILD_DIR/artifacts/)" >&2
  exit 1
fi
