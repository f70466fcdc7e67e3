#include "platform/tile_planner.h"

#include <algorithm>
#include <cstdio>

#include "platform/error.h"

namespace g4 {

namespace {
std::string shape_text(const TileShape& t) {
  return std::to_string(t.m) + " x " + std::to_string(t.n) + " x " + std::to_string(t.k);
}
std::string gpu_label(const DeviceInfo& d) {
  return "sm_" + std::to_string(d.gpu.compute_capability()) + " (" + d.name + ")";
}
}  // namespace

std::string format_kib(uint64_t bytes) {
  char text[48];
  if (bytes % 1024 == 0)
    std::snprintf(text, sizeof text, "%llu KiB", static_cast<unsigned long long>(bytes / 1024));
  else
    std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
  return text;
}

ScratchLimit cpu_l1d_limit(const DeviceInfo& d) { return {d.caches.l1d_bytes, "L1d per core on " + d.name}; }
ScratchLimit cpu_l2_limit(const DeviceInfo& d) { return {d.caches.l2_bytes, "L2 per core on " + d.name}; }
ScratchLimit gpu_smem_limit(const DeviceInfo& d) {
  return {d.gpu.smem_per_block_bytes, "shared memory per block on " + gpu_label(d)};
}
ScratchLimit innermost_scratch_limit(const DeviceInfo& d) {
  return d.kind == DeviceKind::Cuda ? gpu_smem_limit(d) : cpu_l1d_limit(d);
}

uint64_t gemm_tile_scratch_bytes(const TileShape& t, uint64_t a_element_bytes, uint64_t b_element_bytes,
                                 uint64_t accumulator_bytes) {
  const uint64_t m = uint64_t(t.m), n = uint64_t(t.n), k = uint64_t(t.k);
  return m * k * a_element_bytes + k * n * b_element_bytes + m * n * accumulator_bytes;
}

TilePlan plan_tiles(const TileProblem& problem, const ScratchLimit& limit) {
  if (problem.candidates.empty()) throw Error(problem.kernel + ": no candidate tiles to plan from");
  if (!problem.scratch_bytes) throw Error(problem.kernel + ": no per-tile scratch formula");
  if (limit.bytes == 0)
    throw Error(problem.kernel + ": the device limit is unknown (" + limit.what + " = 0); cannot plan tiles");
  for (const TileShape& t : problem.candidates)
    if (t.m <= 0 || t.n <= 0 || t.k <= 0) throw Error(problem.kernel + ": invalid candidate tile " + shape_text(t));

  const TileShape* best = nullptr;
  uint64_t best_bytes = 0;
  uint64_t largest_volume = 0;
  const TileShape* smallest = &problem.candidates.front();
  uint64_t smallest_bytes = problem.scratch_bytes(*smallest);
  for (const TileShape& t : problem.candidates) {
    const uint64_t bytes = problem.scratch_bytes(t);
    largest_volume = std::max(largest_volume, t.volume());
    if (bytes < smallest_bytes) {
      smallest = &t;
      smallest_bytes = bytes;
    }
    if (bytes <= limit.bytes && (best == nullptr || t.volume() > best->volume())) {
      best = &t;
      best_bytes = bytes;
    }
  }
  if (best == nullptr)
    throw Error(problem.kernel + ": needs " + format_kib(smallest_bytes) + " per tile for " + shape_text(*smallest) +
                " (the smallest candidate), device allows " + format_kib(limit.bytes) + " (" + limit.what + ")");
  return TilePlan{problem.kernel, *best, best_bytes, limit, best->volume() < largest_volume};
}

std::string describe_tile_plan(const TilePlan& plan) {
  return plan.kernel + ": tile " + shape_text(plan.tile) + " uses " + format_kib(plan.scratch_bytes) + " of " +
         format_kib(plan.limit.bytes) + " (" + plan.limit.what + ")" +
         (plan.shrunk ? "; larger candidates did not fit" : "");
}

}  // namespace g4
