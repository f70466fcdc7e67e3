#include "model/requantize.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "ops/matmul/dot_kernels.h"
#include "ops/quant/quant_dot.h"
#include "platform/error.h"
#include "platform/mapped_file.h"

namespace g4 {

DType weight_format_from_flag(const std::string& flag) {
  if (flag == "q8" || flag == "q8_0") return DType::Q8_0;
  if (flag == "q4" || flag == "q4_0") return DType::Q4_0;
  throw Error("--weights '" + flag + "': expected q8 or q4");
}

RequantizeReport requantize_weights(Model& m, DType target, ThreadPool* pool) {
  if (target != DType::Q8_0 && target != DType::Q4_0)
    throw Error("requantize: target must be Q8_0 or Q4_0, got " + std::string(dtype_name(target)));
  const auto t0 = std::chrono::steady_clock::now();
  RequantizeReport rep;
  // Which matrices to convert (rows must be whole blocks), then one huge-page arena for all.
  struct Job {
    const TensorView** slot;
    int64_t in, rows;
    uint64_t offset;
  };
  std::vector<Job> jobs;
  uint64_t total = 0;
  auto consider = [&](const TensorView** slot) {
    const TensorView* t = *slot;
    if (!t || t->shape.size() < 2 || t->dtype == target) return;
    const int64_t in = t->shape.back();
    if (in % dtype_block_size(target)) return;
    const int64_t rows = t->numel() / in;
    jobs.push_back({slot, in, rows, total});
    total += (uint64_t(rows) * row_bytes(target, in) + 63) / 64 * 64;
  };
  ModelWeights& w = m.weights;
  const bool tied = w.lm_head == w.embed_tokens;
  consider(&w.embed_tokens);
  if (!tied) consider(&w.lm_head);
  consider(&w.per_layer_model_projection);
  for (LayerWeights& lw : w.layers) {
    for (const TensorView** t : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj, &lw.gate_proj, &lw.up_proj,
                                 &lw.down_proj, &lw.ple_input_gate, &lw.ple_projection, &lw.experts_gate_up,
                                 &lw.experts_down})
      consider(t);
  }
  if (jobs.empty()) return rep;
  HugePageBuffer arena(total);
  for (const Job& j : jobs) {
    const TensorView& src = **j.slot;
    const uint64_t rb = row_bytes(target, j.in);
    std::byte* dst = arena.data() + j.offset;
    // Per-element sources (F32/BF16/F16) widen with SIMD (exact either way); block types decode.
    // Rows read through the checkpoint's mapping are released as they are done, so the process
    // does not keep the checkpoint's pages beside their re-encoded copy.
    const bool widen = dtype_size(src.dtype) != 0, mapped = m.mapped(src.data);
    // Released 8 MiB at a time: each release is a system call and a TLB flush on every core.
    const uint64_t src_rb = row_bytes(src.dtype, j.in);
    const int64_t rows_per_release = std::max<int64_t>(1, int64_t((uint64_t(8) << 20) / std::max<uint64_t>(1, src_rb)));
    auto work = [&](int64_t b, int64_t e, int) {
      std::vector<float> row(static_cast<size_t>(j.in));
      for (int64_t r0 = b; r0 < e; r0 += rows_per_release) {
        const int64_t r1 = std::min(e, r0 + rows_per_release);
        for (int64_t r = r0; r < r1; ++r) {
          if (widen) ops::widen_row(src.row_data(r), src.dtype, size_t(j.in), row.data());
          else src.row_to_f32(r, row.data());
          ops::quantize_row(target, row.data(), dst + uint64_t(r) * rb, j.in);
        }
        if (mapped) release_mapped_pages(src.row_data(r0), uint64_t(r1 - r0) * src_rb);
      }
    };
    if (pool) pool->parallel_for(j.rows, work);
    else work(0, j.rows, 0);
    TensorView v = src;
    v.dtype = target;
    v.data = dst;
    v.nbytes = uint64_t(j.rows) * rb;
    v.file = "(in memory, requantized from " + src.file + ")";
    v.file_offset = 0;
    rep.bytes_before += src.nbytes;
    rep.bytes_after += v.nbytes;
    rep.tensors += 1;
    m.replace_view(j.slot, std::move(v));  // a tied head follows the embedding
  }
  m.owned_data.push_back(std::move(arena));
  // Keep the byte accounting truthful for bench and info.
  w.bound_bytes = w.bound_bytes - rep.bytes_before + rep.bytes_after;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace g4
