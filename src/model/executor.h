// How the Gemma 4 math (model/gemma4.h) runs: the executor behind every primitive the forward
// pass uses. With no matmul context it is the reference loops (the spec: plain f32, one
// thread); with one it is the SIMD kernels on a thread pool, which also split row-wise steps over
// the pool, warm the next product's weights during decode and keep working buffers across steps.
// Either way each value is computed from the same inputs in the same order per row, so splitting
// rows or prefetching never changes a bit; only the kernels' own rounding differs (tested).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/matmul/matmul.h"
#include "platform/tensor_view.h"

namespace g4::blocks {

using Vec = std::vector<float>;

// Wall time a forward pass spent in its weight products and in its attention, added up on the
// calling thread (each timed from hand-off to result, the pool's waits included). For g4 bench's
// breakdown of a decoded token; the rest of a step (norms, RoPE, activations, the cache writes)
// is its total less these two.
struct StepTimes {
  double weight_products_s = 0, attention_s = 0;
};

// The working buffers of one layer, one per use so none aliases another while both are live.
enum class Buffer { Normed, GateUp, AttentionOut, FeedForwardOut, PleGate, PleOut, kCount };

// A working buffer of at least n floats that a product or copy overwrites whole: contents on
// entry are whatever the last use left. Up to 64 Mi floats the storage is kept per thread and
// per Buffer across layers and steps (fresh zero-filled buffers cost a prefill a few % in
// memset); a larger one belongs to this object.
class Scratch {
 public:
  Scratch(Buffer which, size_t n);
  float* data() { return buf_->data(); }

 private:
  Vec fresh_;
  Vec* buf_;
};

struct Exec {
  const ops::MatmulContext* matmul = nullptr;  // null: the reference loops
  StepTimes* times = nullptr;  // when set, every weight product and attention adds its wall time
  // The SIMD attention (model/cached_attention.h): a layer's attention runs on the pool only
  // with at least this many multiply-adds (below that, waking the threads costs more than it
  // saves); each row's keys are cut into slices of attention_slice keys (work items, softmax
  // states merged in order). The slice length is part of the arithmetic (f32 rounding), never
  // chosen from the batch or the pool. Tests lower both to exercise those paths on tiny models.
  int64_t attention_parallel_min_fmas = int64_t(1) << 17;
  int64_t attention_slice = 256;
  // Row-wise steps split over the pool by rows from this many values (a decode token's are too
  // small to pay for a hand-off). Tests lower it to split tiny models' rows.
  int64_t row_parallel_min_values = 32768;

  bool simd() const { return matmul != nullptr; }
  // y[T, out] = x[T, in] · Wᵀ
  void product(const float* x, int64_t T, const TensorView& w, float* y) const;
  Vec linear(const Vec& x, int64_t T, const TensorView& w) const;
  // x · wᵢᵀ into each product's y, for matrices of the same input (one hand-off to the pool).
  void products(const float* x, int64_t T, const std::vector<ops::Product>& ps) const;
  // RMSNorm of each of `rows` rows of n values, times w (null: no weight).
  void rms_norm(float* x, int64_t rows, int64_t n, const TensorView* w, float eps) const;
  // g[i] = gelu_tanh(g[i]) · u[i] over n values.
  void gelu_tanh_mul(float* g, const float* u, size_t n) const;
  // x[i] = cap · tanh(x[i] / cap)
  void softcap(Vec& x, float cap) const;
  // a += b and a *= s, over rows of `width` values.
  void add(float* a, const float* b, int64_t rows, int64_t width) const;
  void scale(Vec& a, float s, int64_t width) const;
  // fn(begin, end) over rows [0, rows) of `width` values each, split over the pool when there are
  // enough of them; each row must be computed alone.
  void for_rows(int64_t rows, int64_t width, const std::function<void(int64_t, int64_t)>& fn) const;
  // Decode (T == 1) on the SIMD path: the pool's workers start reading these weights, the next
  // products, while this thread does the serial steps in between. Reads only.
  void prefetch(int64_t T, const std::vector<const TensorView*>& next) const;
};

}  // namespace g4::blocks
