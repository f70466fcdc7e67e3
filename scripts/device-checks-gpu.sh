#!/usr/bin/env bash
# The GPU part of the device checks (issue 51, item 8), from a kit packed by
# scripts/pack-device-kit.sh, which carries the Vulkan loader (libvulkan1) beside g4: the Vulkan
# probe, the GPU tests on the real device (the shared fixtures' logits, the engine's batching,
# cache hits, forks and rollbacks), then g4 bench --device vulkan on a synthetic E2B in BF16, Q8_0
# and Q4_0 (prefill, decode, TTFT, the device's busy share). llama.cpp's Vulkan llama-bench runs on
# the same GGUF files in the same run where a binary is given (LLAMA_BENCH=path; the kit has none:
# llama.cpp is not a Debian package here). Output under $OUT (default /tmp/out).
# Run on the lent machine as: scripts/device-checks.sh gpu (after carrying .devkit).
set -uo pipefail
K=$(cd "$(dirname "$0")/../.devkit" && pwd)
G="$K/g"
O=${OUT:-/tmp/out}
mkdir -p "$O"
step() { echo "=== $(date +%T) $*"; }
# NVIDIA's driver installs its ICD file outside the loader's default search path on the lent hosts.
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
  [[ -f $icd ]] && export VK_DRIVER_FILES=$icd && break
done
{
  step gpu; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
  step cpu; grep -m1 "model name" /proc/cpuinfo; nproc
  step device; timeout 60 "$G" "$K/g4" device
  step tests-gpu; timeout 240 "$G" "$K/g4_tests_gpu" --gtest_brief=1
} 2>&1 | tee "$O/gpu_checks.txt"
{
  step synth; timeout 180 "$G" "$K/g4" synth --preset e2b --out /tmp/e2b --dtype bf16 >/dev/null
  for t in q8_0 q4_0; do
    timeout 180 "$G" "$K/g4" quantize /tmp/e2b "/tmp/e2b-$t.gguf" --type "$t" >/dev/null
  done
  for m in /tmp/e2b /tmp/e2b-q8_0.gguf /tmp/e2b-q4_0.gguf; do
    step "bench-vulkan $m"
    timeout 150 "$G" "$K/g4" bench --model "$m" --device vulkan --prompt-len 512 --gen 32 --depth 4096 --repeat 2
    if [[ -n ${LLAMA_BENCH:-} && $m == *.gguf ]]; then
      step "llama-bench $m"; timeout 150 "$LLAMA_BENCH" -m "$m" -p 512 -n 32 -r 2
    fi
  done
  [[ -z ${LLAMA_BENCH:-} ]] && echo "llama-bench: not run (LLAMA_BENCH unset: no llama.cpp build in the kit)"
  step done
} 2>&1 | tee "$O/gpu_bench.txt"
