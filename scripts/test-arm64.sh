#!/usr/bin/env bash
# Cross-builds g4's tests for aarch64 Linux (Debian's cross compiler and arm64 multiarch packages,
# cmake/aarch64-linux-gnu.cmake) and runs the platform, ops, model, text, media and engine test binaries
# under qemu-aarch64 (user mode; the tiny fixture models). Each binary runs once with a gtest
# filter rather than once per test through ctest: that would start qemu ~650 times.
# Prints the build time, each binary's time under qemu, and the totals; exits non-zero on any
# failure. G4_ARM64_BUILD_DIR overrides the build folder (default build-arm64); extra arguments
# go to every test binary (e.g. --gtest_filter=DtypePolicy.*).
#
# Left out on purpose:
# - the cli and server tests: they start the g4 binary (and node, for the OpenAI client) as child
#   processes over and over, each a fresh qemu; the server end-to-end tests also time requests
#   and signal the server (SIGTERM drain), and the cli fault tests kill children by signal.
# - the tests excluded below, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-arm64-cross.sh
B="${G4_ARM64_BUILD_DIR:-build-arm64}"
LAYERS=(platform ops model text media engine)

declare -A EXCLUDE
# platform:
# - MappedFile.TruncatedWhileMappedIsANamedFatalError, MappedFile.OtherSigbusKeepsItsUsualEnd: a
#   read past the end of a truncated mapping must raise SIGBUS in a forked child; qemu-user 7.2
#   never delivers it, and the child spins at 100% CPU until killed (seen: 11 minutes).
# - TensorView.WillReadRowsBringsEvictedRowsIntoThePageCache: checks that madvise(MADV_WILLNEED)
#   reads evicted pages back in; qemu-user answers madvise with success without passing it to the
#   kernel, so the pages never arrive and the test fails after its 10 s wait.
# - FmaScaling.MeasuresSomethingPlausible, MacPeak.CountsEachInstructionsOperations: assert a
#   measured multiply-add rate of at least 0.1 GFLOP/s on one thread (and a cores' worth below 3),
#   figures for native code; qemu emulates every FMA in software, on cores shared with other work.
EXCLUDE[platform]="MappedFile.TruncatedWhileMappedIsANamedFatalError:MappedFile.OtherSigbusKeepsItsUsualEnd"
EXCLUDE[platform]+=":TensorView.WillReadRowsBringsEvictedRowsIntoThePageCache"
EXCLUDE[platform]+=":FmaScaling.MeasuresSomethingPlausible:MacPeak.CountsEachInstructionsOperations"
# engine:
# - StructuredOutput.ThousandSampledCompletionsValidateAgainstTheirSchemas (208 s under qemu) and
#   StructuredOutput.JsonObjectModeGivesAnObject (61 s): too slow for this script's budget; both
#   exercise the grammar matcher and sampler, plain C++ with no architecture-specific code, which
#   the native suite runs in full. The other structured-output tests still run here.
# - SpeculativeSynth.SampledTriplesFollowTheTargetsJointDistribution (3000 seeded requests through
#   the engine, 5 s native): a statistical test of the sampler and the verification order, plain
#   C++; the other speculative tests (rollbacks, adversarial drafters on the NEON kernels) run here.
EXCLUDE[engine]="StructuredOutput.ThousandSampledCompletionsValidateAgainstTheirSchemas"
EXCLUDE[engine]+=":StructuredOutput.JsonObjectModeGivesAnObject"
EXCLUDE[engine]+=":SpeculativeSynth.SampledTriplesFollowTheTargetsJointDistribution"

# The loader and C library of one package (see the toolchain file): the multiarch libc6:arm64
# where installed, else the cross sysroot.
EMU=(qemu-aarch64)
[ -e /lib/ld-linux-aarch64.so.1 ] || EMU+=(-L /usr/aarch64-linux-gnu)

t0=$(date +%s)
cmake -B "$B" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
      -DG4_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=()
for layer in "${LAYERS[@]}"; do targets+=("g4_tests_$layer"); done
cmake --build "$B" -j "$(nproc)" --target "${targets[@]}"
build_s=$(( $(date +%s) - t0 ))
echo "test-arm64: build ${build_s} s"

mkdir -p "$B/arm64-logs"
passed=0 failed=0 skipped=0 test_s=0 status=0 report=()
count() { sed -n "s/^\[  $1 \] \([0-9]*\) tests\?[,.].*/\1/p" "$2" | head -n 1; }
for layer in "${LAYERS[@]}"; do
  log="$B/arm64-logs/$layer.log"
  filter=()
  [ -n "${EXCLUDE[$layer]:-}" ] && filter=("--gtest_filter=-${EXCLUDE[$layer]}")
  s=$(date +%s)
  rc=0
  timeout 900 "${EMU[@]}" "$B/g4_tests_$layer" "${filter[@]}" "$@" >"$log" 2>&1 </dev/null || rc=$?
  secs=$(( $(date +%s) - s ))
  test_s=$(( test_s + secs ))
  p=$(count "PASSED " "$log"); f=$(count "FAILED " "$log"); k=$(count "SKIPPED" "$log")
  p=${p:-0} f=${f:-0} k=${k:-0}
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
  excluded=0
  [ -n "${EXCLUDE[$layer]:-}" ] && excluded=$(tr ':' '\n' <<<"${EXCLUDE[$layer]}" | grep -c .)
  line="g4_tests_$layer: ${secs} s, $p passed, $f failed, $k skipped, $excluded excluded (rc $rc)"
  echo "test-arm64: $line"
  report+=("$line")
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E '^\[  FAILED  \]|Failure$' "$log" | head -n 40 || true
    [ "$rc" -eq 124 ] && echo "test-arm64: g4_tests_$layer timed out (900 s); log: $log"
  fi
done
echo "test-arm64: build ${build_s} s, tests ${test_s} s under qemu-aarch64; logs in $B/arm64-logs/"
for line in "${report[@]}"; do echo "  $line"; done
echo "arm64: $passed passed, $failed failed, $skipped skipped"
exit $status
