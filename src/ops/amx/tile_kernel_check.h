// What the three AMX kernels (gemm_bf16_tiles, gemm_q8_tiles, attention_bf16_tiles) share: the
// result of the one-time check that gates each kernel on this CPU, the steps every check takes,
// and the prefill blocking rule of the two products.
//
// A tile kernel runs on the CPU's AMX only after the probe (cpuid, the OS's grant of tile state),
// the one-instruction self-test and the kernel's own check (that kernel, on this CPU, against a
// scalar truth) have all passed: an optional unit is used only once confirmed.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace g4::ops {

struct TileKernelCheck {
  bool run = false;  // false: the probe or the tile self-test did not confirm the unit
  bool passed = false;
  std::string detail;  // what was checked, or what failed and by how much, or why it did not run
};

// The check a kernel's `amx_*_kernel_check()` caches: `check()` when `confirmed` (the probe and
// self-tests passed), else a check that did not run, saying `not_confirmed`.
TileKernelCheck gated_kernel_check(bool confirmed, const char* not_confirmed, TileKernelCheck (*check)());

// Runs `body` (the kernel on the check's inputs) with c.run set; false, with c.detail saying
// "SIGILL in the <kernel>", when the CPU refused an instruction.
bool run_kernel_check(TileKernelCheck& c, const std::string& kernel, const std::function<void()>& body);

// Marks c passed with `what` (what was checked) as its detail.
void pass_kernel_check(TileKernelCheck& c, std::string what);

// The blocking of a tiled product's prefill: the columns in chunks of equal whole steps, a chunk
// of one row unit's weights at most an eighth of `budget_bytes`, and the token block as many
// token panels as fit the rest, clamped to [1, max_panels]. Budget 0: one panel, all columns.
struct TileBlockingShape {
  int64_t step_columns;           // columns per step (one tile row of the weights)
  uint64_t unit_bytes_per_step;   // one row unit's weight bytes per step
  uint64_t token_bytes_per_step;  // one token's activation bytes per step
  int64_t panel_tokens;           // tokens per panel
  int64_t max_panels;
};
struct TileBlocking {
  int64_t token_block;  // a multiple of panel_tokens
  int64_t k_chunk;      // a multiple of step_columns
};
TileBlocking tile_blocking(int64_t in, uint64_t budget_bytes, const TileBlockingShape& shape);

}  // namespace g4::ops
