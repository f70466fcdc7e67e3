#include "gpu/shader_tiles.h"

#include <algorithm>

#include "platform/error.h"

namespace g4::gpu {

uint64_t matmul_shared_bytes(const MatmulTile& t) {
  return (uint64_t(t.rows) + t.cols) * (uint64_t(t.depth) + 1) * sizeof(float);
}

const std::vector<MatmulTile>& matmul_tile_ladder() {
  // Largest fits NVIDIA's 48 KiB and lavapipe's 32 KiB; the smallest fits 4 KiB devices. Each
  // tile's rows x cols is a multiple of the 64-invocation workgroup (one or more outputs each).
  static const std::vector<MatmulTile> ladder = {{64, 64, 32, 64}, {32, 32, 32, 64}, {16, 16, 16, 64}};
  return ladder;
}

ShaderTilePlan plan_matmul_tile(const VulkanDeviceInfo& d) {
  const std::vector<MatmulTile>& ladder = matmul_tile_ladder();
  TileProblem problem;
  problem.kernel = "matmul";
  for (const MatmulTile& t : ladder) {
    if (t.workgroup > d.max_workgroup_invocations && d.max_workgroup_invocations != 0)
      throw Error("matmul: a workgroup of " + std::to_string(t.workgroup) + " invocations exceeds " + d.name +
                  "'s maxComputeWorkGroupInvocations " + std::to_string(d.max_workgroup_invocations));
    problem.candidates.push_back({int(t.rows), int(t.cols), int(t.depth)});
  }
  problem.scratch_bytes = [](const TileShape& s) {
    return matmul_shared_bytes({uint32_t(s.m), uint32_t(s.n), uint32_t(s.k), 64});
  };
  const ScratchLimit limit{d.max_shared_memory_bytes, "maxComputeSharedMemorySize of " + d.name};
  TilePlan plan;
  try {
    plan = plan_tiles(problem, limit);
  } catch (const Error& e) {
    // The platform planner words the refusal in KiB; the exact bytes make the arithmetic checkable.
    const uint64_t smallest = matmul_shared_bytes(ladder.back());
    throw Error(std::string(e.what()) + " [" + std::to_string(smallest) + " bytes per workgroup needed, " +
                std::to_string(limit.bytes) + " bytes allowed]");
  }
  const auto it = std::find_if(ladder.begin(), ladder.end(), [&](const MatmulTile& t) {
    return int(t.rows) == plan.tile.m && int(t.cols) == plan.tile.n && int(t.depth) == plan.tile.k;
  });
  return {"matmul", *it, plan.scratch_bytes, limit.bytes, plan.shrunk, describe_tile_plan(plan)};
}

uint64_t reduction_shared_bytes(uint32_t workgroup) { return uint64_t(workgroup) * sizeof(float); }

ReductionPlan plan_reduction(const VulkanDeviceInfo& d) {
  TileProblem problem;
  problem.kernel = "row-reduction";
  for (const int wg : {256, 128, 64, 32})
    if (d.max_workgroup_invocations == 0 || uint32_t(wg) <= d.max_workgroup_invocations)
      problem.candidates.push_back({wg, 1, 1});
  if (problem.candidates.empty())
    throw Error("row-reduction: " + d.name + " allows " + std::to_string(d.max_workgroup_invocations) +
                " invocations per workgroup, fewer than the 32 the reduction shaders need");
  problem.scratch_bytes = [](const TileShape& s) { return reduction_shared_bytes(uint32_t(s.m)); };
  const TilePlan plan = plan_tiles(problem, {d.max_shared_memory_bytes, "maxComputeSharedMemorySize of " + d.name});
  return {uint32_t(plan.tile.m), plan.scratch_bytes, describe_tile_plan(plan)};
}

}  // namespace g4::gpu
