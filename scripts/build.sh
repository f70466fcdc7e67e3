#!/usr/bin/env bash
# Configures and builds g4 into build/ (or $G4_BUILD_DIR) with CMake + Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${G4_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${G4_BUILD_TYPE:-RelWithDebInfo}" ${G4_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "${G4_JOBS:-$(nproc)}"
