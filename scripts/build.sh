#!/usr/bin/env bash
# Configures and builds g4 into build/ (or $G4_BUILD_DIR) with CMake + Ninja.
#   scripts/build.sh            every target: g4, the test binaries and the microbenchmarks
#   scripts/build.sh TARGET...  only those (README command 1 builds `g4` alone: the tests and
#                               benchmarks are most of a clean build and it runs none of them)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${G4_BUILD_DIR:-build}"
targets=()
[ "$#" -gt 0 ] && targets=(--target "$@")
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${G4_BUILD_TYPE:-RelWithDebInfo}" ${G4_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "${G4_JOBS:-$(nproc)}" ${targets[@]+"${targets[@]}"}
