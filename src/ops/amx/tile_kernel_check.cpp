#include "ops/amx/tile_kernel_check.h"

#include <algorithm>
#include <utility>

#include "platform/sigill_guard.h"

namespace g4::ops {

TileKernelCheck gated_kernel_check(bool confirmed, const char* not_confirmed, TileKernelCheck (*check)()) {
  if (confirmed) return check();
  TileKernelCheck c;
  c.detail = not_confirmed;
  return c;
}

bool run_kernel_check(TileKernelCheck& c, const std::string& kernel, const std::function<void()>& body) {
  c.run = true;
  if (run_catching_sigill(body)) return true;
  c.detail = "SIGILL in the " + kernel;
  return false;
}

void pass_kernel_check(TileKernelCheck& c, std::string what) {
  c.passed = true;
  c.detail = std::move(what);
}

TileBlocking tile_blocking(int64_t in, uint64_t budget_bytes, const TileBlockingShape& s) {
  const int64_t steps = std::max<int64_t>(in, s.step_columns) / s.step_columns;
  if (budget_bytes == 0) return {s.panel_tokens, steps * s.step_columns};
  const uint64_t chunk_budget = budget_bytes / 8;
  const int64_t max_steps = int64_t(std::max<uint64_t>(1, chunk_budget / s.unit_bytes_per_step));
  const int64_t chunks = (steps + max_steps - 1) / max_steps, chunk = (steps + chunks - 1) / chunks;
  const uint64_t unit = uint64_t(chunk) * s.unit_bytes_per_step, token = uint64_t(chunk) * s.token_bytes_per_step;
  const uint64_t panels = budget_bytes > unit ? (budget_bytes - unit) / (token * uint64_t(s.panel_tokens)) : 0;
  return {int64_t(std::clamp<uint64_t>(panels, 1, uint64_t(s.max_panels))) * s.panel_tokens, chunk * s.step_columns};
}

}  // namespace g4::ops
