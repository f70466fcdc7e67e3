#!/usr/bin/env bash
# The checks to run where a CPU has units this machine lacks (AMX above all), from a kit packed by
# scripts/pack-device-kit.sh: the probe with the dot-product peaks, the tile kernels' tests on the
# CPU's own tiles, the tile microbenchmarks (tiles on and off in one run; attention on VDPBF16PS and
# on tiles), and g4 bench for bf16, q8 and q4 on 2 threads. Output under $OUT (default /tmp/out).
# Budget: ~6-8 minutes on 16 vCPUs. `scripts/device-checks.sh gpu` runs the GPU part instead
# (scripts/device-checks-gpu.sh): ~6-9 minutes on a lent GPU machine.
set -uo pipefail
if [[ ${1:-} == gpu ]]; then exec "$(dirname "$0")/device-checks-gpu.sh"; fi
K=$(cd "$(dirname "$0")/../.devkit" && pwd)
G="$K/g"
O=${OUT:-/tmp/out}
mkdir -p "$O"
step() { echo "=== $(date +%T) $*"; }
{
  step cpu; grep -m1 "model name" /proc/cpuinfo; nproc
  grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E 'amx|avx512_bf16|avx512_vnni|avx512_fp16' | tr '\n' ' '; echo
  step device; timeout 60 "$G" "$K/g4" device --fma --threads 2
  step tests-ops; timeout 120 "$G" "$K/g4_tests_ops" --gtest_brief=1 --gtest_filter='Bf16Tiles.*:GemmBf16.*:*Int8Tiles*:TileRegisterModel.*:*GemmQ8*:AttentionBf16*'
  step tests-platform; timeout 60 "$G" "$K/g4_tests_platform" --gtest_brief=1
  step tests-engine; timeout 120 "$G" "$K/g4_tests_engine" --gtest_brief=1 --gtest_filter='Bf16Compute.*:Int8Activations.*'
} 2>&1 | tee "$O/checks.txt"
{
  step micro; timeout 90 "$G" "$K/g4_microbench" --benchmark_filter='Prefill512_(BF16|Q8_0|Q4_0)_R16/./2/512/2' \
    --benchmark_min_time=0.3
  # bf16 tiles: column chunks (0: the engine's) against all columns at once (-1), one thread,
  # down-like matrices (1) and E2B's decoder layers (2).
  step micro-chunks; timeout 90 "$G" "$K/g4_microbench" --benchmark_filter='TilesBF16/0/[12]/(0|-1)/' \
    --benchmark_min_time=0.3
  # Attention: the VDPBF16PS kernel (2, 3) against the tiles (5, 4), one row at depth 4096 from
  # memory and one E2B full / sliding layer from the cache on 2 threads.
  step micro-attention; timeout 90 "$G" "$K/g4_microbench" \
    --benchmark_filter='AttendDecode/4096/[25]/(256|512)/16|AttendLayerFromCache/[34]/2/' --benchmark_min_time=0.3
  step synth; timeout 120 "$G" "$K/g4" synth --preset e2b --out /tmp/e2b --dtype bf16 >/dev/null
  for w in bf16 q8 q4; do
    step "bench-$w"
    extra=(); [[ $w != bf16 ]] && extra=(--weights "$w")
    timeout 100 "$G" "$K/g4" bench --model /tmp/e2b "${extra[@]}" --prompt-len 512 --gen 32 --depth 4096 --repeat 3 \
      --threads 2 --json "$O/bench_$w.json" 2>/dev/null
  done
  step done
} 2>&1 | tee "$O/bench.txt"
