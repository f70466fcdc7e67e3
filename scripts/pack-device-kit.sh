#!/usr/bin/env bash
# Packs what a run on another machine needs into .devkit/ (ignored by git): g4, the test binaries
# and the microbenchmarks, stripped, with the Debian shared libraries they load and the loader
# itself, plus a wrapper `.devkit/g` that runs a binary against those libraries. For machines
# lent for minutes (e.g. the device tool's GPU host, whose CPU may have AMX) that have no
# toolchain or packages of ours: carry .devkit, then run `.devkit/g .devkit/g4 device --fma` or
# `scripts/device-checks.sh`. Build first (scripts/build.sh). About 30 MiB, and for the GPU part
# (`scripts/device-checks.sh gpu`) g4_tests_gpu, the Vulkan loader g4 opens at run time
# (libvulkan.so.1, which no ldd sees) and the tiny fixtures it checks against: about 50 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
K=.devkit
rm -rf "$K" && mkdir -p "$K/lib"
bins=(g4 g4_microbench g4_tests_ops g4_tests_platform g4_tests_engine)
[[ -x "$B/g4_tests_gpu" ]] && bins+=(g4_tests_gpu)
for b in "${bins[@]}"; do
  [[ -x "$B/$b" ]] || { echo "pack-device-kit: $B/$b is missing: run scripts/build.sh first" >&2; exit 1; }
  strip -o "$K/$b" "$B/$b"
done
# Every shared library the binaries load, resolved here, and the loader they name.
for b in "${bins[@]}"; do ldd "$B/$b"; done | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | sort -u |
  while read -r lib; do
    case "$lib" in
      */ld-linux*) cp -L "$lib" "$K/ld-linux-x86-64.so.2" ;;
      *) cp -L "$lib" "$K/lib/" ;;
    esac
  done
# The Vulkan loader is dlopen'd by g4 (so the wrapper's library path finds it); the GPU tests read
# the shared fixtures through G4_SHARED.
vk=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/{print $NF; exit}')
[[ -n "$vk" ]] && cp -L "$vk" "$K/lib/libvulkan.so.1"
# (the checkpoints and the expected logits only: ~7 MiB, so kit and tree stay under the 64 MiB a
# device call carries)
for f in ../shared/fixtures/gemma4-tiny/*/; do
  d="$K/shared/fixtures/gemma4-tiny/$(basename "$f")"
  mkdir -p "$d" && cp -r "$f/hf" "$f/expected.json" "$f/expected_logits.f32" "$d/"
done
cat > "$K/g" <<'WRAP'
#!/bin/sh
K=$(cd "$(dirname "$0")" && pwd)
export G4_SHARED="${G4_SHARED:-$K/shared}"
exec "$K/ld-linux-x86-64.so.2" --library-path "$K/lib" "$@"
WRAP
chmod +x "$K/g"
du -sh "$K"
