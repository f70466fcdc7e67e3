#!/usr/bin/env bash
# README command 2: build (if needed) and run the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir "${G4_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
