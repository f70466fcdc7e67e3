// The tile planner for g4's compute shaders: each shader's shared memory per workgroup is
// computed on the host from the tile it would be specialized with, a ladder of tiles is tried
// largest first against the device's maxComputeSharedMemorySize, and when not even the smallest
// fits the load is refused with the arithmetic (docs/lessons.md, lesson 2: tiles of 550 KiB-1.1 MiB
// met 64-100 KiB of shared memory deep inside a run). The chosen tile reaches the shader as
// specialization constants, so the formula here and the shader's arrays are the same numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/gpu_device.h"
#include "platform/tile_planner.h"

namespace g4::gpu {

// matmul.comp's tile: a workgroup of `workgroup` invocations computes rows x cols of y, stepping
// over the reduction `depth` at a time (specialization constants 0-3: WG, BM, BN, BK).
struct MatmulTile {
  uint32_t rows = 0;   // BM: tokens
  uint32_t cols = 0;   // BN: output features
  uint32_t depth = 0;  // BK: input features per step
  uint32_t workgroup = 64;
  bool operator==(const MatmulTile&) const = default;
};

// Shared bytes of matmul.comp: x and W tiles as f32, each row padded by one float
// ((rows + cols) * (depth + 1) * 4), whatever format W is stored in (it is widened on load).
uint64_t matmul_shared_bytes(const MatmulTile& tile);

// Largest first: 64 x 64 x 32 (16.5 KiB), 32 x 32 x 32 (8.25 KiB), 16 x 16 x 16 (2.1 KiB).
const std::vector<MatmulTile>& matmul_tile_ladder();

struct ShaderTilePlan {
  std::string shader;
  MatmulTile tile;
  uint64_t shared_bytes = 0;
  uint64_t limit_bytes = 0;
  bool shrunk = false;  // a larger tile of the ladder did not fit
  std::string text;     // "matmul: tile 64 x 64 x 32 uses 16.5 KiB of 32 KiB (...)"
};

// Throws g4::Error when no tile fits: "matmul: needs 2.1 KiB (2176 bytes) per workgroup for
// 16 x 16 x 16 (the smallest candidate), device allows 2 KiB (2048 bytes) ...".
ShaderTilePlan plan_matmul_tile(const VulkanDeviceInfo& device);

// rms_norm.comp and softmax.comp: one workgroup per row, reducing through `workgroup` floats of
// shared memory (workgroup * 4 bytes). The ladder is 256, 128, 64, 32 invocations (powers of two
// for the tree reduction), largest first, within both the shared memory and the workgroup limit.
struct ReductionPlan {
  uint32_t workgroup = 0;
  uint64_t shared_bytes = 0;
  std::string text;  // "row-reduction: tile 256 x 1 x 1 uses 1 KiB of 32 KiB (...)"
};
uint64_t reduction_shared_bytes(uint32_t workgroup);
// Throws g4::Error with the arithmetic when not even 32 invocations fit.
ReductionPlan plan_reduction(const VulkanDeviceInfo& device);

}  // namespace g4::gpu
