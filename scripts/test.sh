#!/usr/bin/env bash
# README command 2: build (if needed) and run the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-node-deps.sh   # the OpenAI npm client for the server's end-to-end tests
scripts/build.sh
ctest --test-dir "${G4_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
