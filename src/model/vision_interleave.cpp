#include "model/vision_interleave.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "platform/row_interleave.h"

namespace g4 {
namespace {

// The product matrices' slots, so each can be repointed at its interleaved copy.
std::vector<const TensorView**> product_slots(VisionWeights& w) {
  std::vector<const TensorView**> s = {&w.input_proj, &w.embedding_projection};
  for (VisionLayerWeights& l : w.layers)
    for (ClippedLinear* c : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      s.push_back(&c->weight);
  return s;
}

}  // namespace

InterleaveReport interleave_vision_weights(VisionModel& v, ThreadPool* pool) {
  const auto t0 = std::chrono::steady_clock::now();
  InterleaveReport r;
  r.kernels.bf16 = true;
  for (const TensorView** slot : product_slots(v.weights)) {
    const TensorView& src = **slot;
    if (src.dtype != DType::BF16 || src.shape.size() != 2 || src.shape[0] % kInterleaveRows || src.shape[1] % 2) continue;
    const int64_t in = src.shape[1];
    const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(src.dtype, in);
    const int64_t groups = int64_t(src.nbytes / group_bytes);
    std::vector<std::byte>& owned = v.owned_bytes.emplace_back(src.nbytes);
    auto work = [&](int64_t b, int64_t e, int) {
      for (int64_t g = b; g < e; ++g)
        interleave_group(src.dtype, src.data + uint64_t(g) * group_bytes, in, owned.data() + uint64_t(g) * group_bytes);
    };
    if (pool) pool->parallel_for(groups, work);
    else work(0, groups, 0);
    TensorView view = src;
    view.dtype = interleaved_dtype(src.dtype);
    view.data = owned.data();
    *slot = &v.owned_views.emplace_back(std::move(view));
    ++r.tensors;
    ++r.bf16_tensors;
    r.bytes += src.nbytes;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace g4
