#!/usr/bin/env bash
# Installs what the aarch64 cross build and its tests under qemu need (scripts/test-arm64.sh):
# Debian 12's cross compiler, qemu-user, and the arm64 multiarch -dev packages g4 links
# (Highway, GoogleTest/GoogleMock, cpp-httplib with its OpenSSL, zlib and brotli). nlohmann-json is
# header-only and comes from the host's nlohmann-json3-dev (scripts/install-deps.sh). Benchmarks
# are not built for arm64 (-DG4_BUILD_BENCH=OFF), so no libbenchmark-dev:arm64. Idempotent: skips
# what is installed, adds the arm64 architecture only once, uses sudo when not root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

updated=0
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-arm64-cross: adding the arm64 architecture"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  updated=1
fi

# Host tools first (cross compiler, cmake/ninja/pkg-config, the header-only json), then the arm64
# libraries, then qemu-user. qemu-user alone runs the binaries as `qemu-aarch64 PROGRAM`, which is
# how the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR calls it: qemu-user-binfmt (its
# recommendation, which registers arm64 binaries with the kernel) is not needed.
PKGS=(crossbuild-essential-arm64 cmake ninja-build pkg-config nlohmann-json3-dev
      libhwy-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libcpp-httplib-dev:arm64
      libpng-dev:arm64 libjpeg62-turbo-dev:arm64 libwebp-dev:arm64)
missing=()
for p in "${PKGS[@]}"; do installed "$p" || missing+=("$p"); done
installed qemu-user || missing+=(qemu-user)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-arm64-cross: all packages present"
  exit 0
fi
echo "install-arm64-cross: installing ${missing[*]}"
[ $updated -eq 1 ] || $SUDO apt-get update -qq
# crossbuild-essential-arm64 needs its recommends kept (the C library for the target comes with
# them); --no-remove refuses any plan that would take a host package away to fit an arm64 one.
libs=()
for p in "${missing[@]}"; do [ "$p" = qemu-user ] || libs+=("$p"); done
if [ ${#libs[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-remove "${libs[@]}"
fi
if ! installed qemu-user; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-remove --no-install-recommends qemu-user
fi
