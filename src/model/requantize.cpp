#include "model/requantize.h"

#include <chrono>
#include <vector>

#include "ops/quant_dot.h"
#include "platform/error.h"

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
  auto convert = [&](const TensorView*& slot) {
    if (!slot || slot->shape.size() < 2 || slot->dtype == target) return;
    const TensorView& src = *slot;
    const int64_t in = src.shape.back();
    if (in % dtype_block_size(target)) return;
    const int64_t rows = src.numel() / in;
    const uint64_t rb = row_bytes(target, in);
    auto buf = std::make_unique<std::byte[]>(size_t(rows) * rb);
    std::byte* dst = buf.get();
    auto work = [&](int64_t b, int64_t e, int) {
      std::vector<float> row(static_cast<size_t>(in));
      for (int64_t r = b; r < e; ++r) {
        src.row_to_f32(r, row.data());
        ops::quantize_row(target, row.data(), dst + uint64_t(r) * rb, in);
      }
    };
    if (pool) pool->parallel_for(rows, work);
    else work(0, rows, 0);
    TensorView v = src;
    v.dtype = target;
    v.data = dst;
    v.nbytes = uint64_t(rows) * rb;
    v.file = "(in memory, requantized from " + src.file + ")";
    v.file_offset = 0;
    rep.bytes_before += src.nbytes;
    rep.bytes_after += v.nbytes;
    rep.tensors += 1;
    m.owned_data.push_back(std::move(buf));
    m.owned_views.push_back(std::move(v));
    slot = &m.owned_views.back();
  };
  ModelWeights& w = m.weights;
  const bool tied = w.lm_head == w.embed_tokens;
  convert(w.embed_tokens);
  if (tied) w.lm_head = w.embed_tokens;
  else convert(w.lm_head);
  convert(w.per_layer_model_projection);
  for (LayerWeights& lw : w.layers) {
    for (const TensorView** t : {&lw.q_proj, &lw.k_proj, &lw.v_proj, &lw.o_proj, &lw.gate_proj, &lw.up_proj,
                                 &lw.down_proj, &lw.ple_input_gate, &lw.ple_projection, &lw.experts_gate_up,
                                 &lw.experts_down})
      convert(*t);
  }
  // Keep the byte accounting truthful for bench and info.
  w.bound_bytes = w.bound_bytes - rep.bytes_before + rep.bytes_after;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace g4
