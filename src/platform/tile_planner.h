// Tile planner: every tiled kernel states what one tile needs in scratch memory (CPU L1d/L2 per
// core, GPU shared memory per block) and the planner picks the largest candidate tile that fits,
// or refuses at load with the arithmetic (docs/lessons.md, lesson 2: a tile tuned for megabytes of
// scratchpad failed deep inside a run on a 64 KiB GPU).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "platform/device.h"

namespace g4 {

// One tile of C[M x N] += A[M x K] * B[K x N].
struct TileShape {
  int m = 0;
  int n = 0;
  int k = 0;
  uint64_t volume() const { return uint64_t(m) * uint64_t(n) * uint64_t(k); }
  bool operator==(const TileShape&) const = default;
};

// The budget a tile must fit, and what it is (for messages).
struct ScratchLimit {
  uint64_t bytes = 0;
  std::string what;  // "L1d per core on <cpu>", "shared memory per block on sm_75 (Tesla T4)"
};

ScratchLimit cpu_l1d_limit(const DeviceInfo& device);
ScratchLimit cpu_l2_limit(const DeviceInfo& device);
ScratchLimit gpu_smem_limit(const DeviceInfo& device);
// L1d per core on a CPU, shared memory per block on a GPU: the innermost tile's budget.
ScratchLimit innermost_scratch_limit(const DeviceInfo& device);

struct TileProblem {
  std::string kernel;                 // "matmul-q4-dequant", named in plans and refusals
  std::vector<TileShape> candidates;  // any order; the planner prefers the largest volume
  std::function<uint64_t(const TileShape&)> scratch_bytes;  // the kernel's per-tile formula
};

struct TilePlan {
  std::string kernel;
  TileShape tile;
  uint64_t scratch_bytes = 0;
  ScratchLimit limit;
  bool shrunk = false;  // a larger candidate did not fit
};

// Scratch of a plain tile: A[M x K] + B[K x N] operands and C[M x N] accumulators.
uint64_t gemm_tile_scratch_bytes(const TileShape& tile, uint64_t a_element_bytes, uint64_t b_element_bytes,
                                 uint64_t accumulator_bytes);

// Picks the largest candidate whose scratch fits limit.bytes. Throws g4::Error when none fits:
// "<kernel>: needs X KiB per tile for M x N x K, device allows Y KiB (<limit.what>)", quoting the
// smallest candidate; also when the limit is unknown (0) or there are no candidates.
TilePlan plan_tiles(const TileProblem& problem, const ScratchLimit& limit);

std::string describe_tile_plan(const TilePlan& plan);  // "matmul-bf16: tile 64 x 64 x 32 uses 40 KiB of 48 KiB (L1d ...)"

// "96 KiB", "95.5 KiB": the unit the refusal message uses, whatever the size.
std::string format_kib(uint64_t bytes);

}  // namespace g4
