#!/usr/bin/env bash
# Installs g4's build and test dependencies from Debian 12 packages. Idempotent.
set -euo pipefail
PKGS=(g++ cmake ninja-build pkg-config git
      nlohmann-json3-dev libcpp-httplib-dev libhwy-dev
      libpng-dev libjpeg62-turbo-dev libwebp-dev
      libcurl4-openssl-dev libssl-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      clang libclang-rt-14-dev curl universal-ctags
      # Vulkan (src/gpu/): loader and headers, the GLSL-to-SPIR-V compiler the build runs, Mesa's
      # lavapipe (a conformant CPU Vulkan device, so the GPU tests run on GPU-less machines),
      # vulkaninfo, and the Khronos validation layer for debugging shaders.
      libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools vulkan-validationlayers)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm (for the OpenAI-client tests): some machines carry a nodesource nodejs that
# bundles npm and conflicts with Debian's npm package; only install Debian's when npm is absent.
if ! command -v npm >/dev/null 2>&1; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  missing+=(npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
