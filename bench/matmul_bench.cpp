// Weight-product throughput on E2B-like shapes, per weight format and kernel, reported as weight
// bytes streamed per second (decode, T = 1) and tokens per second (prefill, T = 64). The matrix
// set is larger than the last-level cache, so decode figures are memory-bound when the kernel
// keeps up. For comparison against `g4 bench`'s measured read bandwidth.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/matmul.h"
#include "ops/quant_dot.h"
#include "platform/dtype.h"
#include "platform/huge_pages.h"
#include "platform/tensor_view.h"
#include "platform/thread_pool.h"

namespace g4 {
namespace {

// 12 E2B gate-sized [6144, 1536] or down-sized [1536, 6144] matrices: ~113 MiB in Q8_0.
constexpr int64_t kMatrices = 12;
struct Shape {
  int64_t out, in;
};
constexpr Shape kShapes[2] = {{6144, 1536}, {1536, 6144}};

struct Weights {
  HugePageBuffer buffer;
  std::vector<TensorView> views;
  uint64_t bytes = 0;
};

const Weights& weights(DType t, int shape) {
  static std::vector<std::unique_ptr<Weights>> cache(32);
  auto& slot = cache[size_t(t) * 2 + size_t(shape)];
  const int64_t kOut = kShapes[shape].out, kIn = kShapes[shape].in;
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  const uint64_t rb = row_bytes(t, kIn), mat = rb * uint64_t(kOut);
  slot->buffer = HugePageBuffer(mat * kMatrices);
  slot->bytes = mat * kMatrices;
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 0.5f);
  std::vector<float> row(static_cast<size_t>(kIn));
  for (int64_t m = 0; m < kMatrices; ++m) {
    std::byte* base = slot->buffer.data() + m * mat;
    for (int64_t o = 0; o < kOut; ++o) {
      for (auto& v : row) v = g(rng);
      if (t == DType::BF16) {
        auto* dst = reinterpret_cast<uint16_t*>(base + o * rb);
        for (int64_t i = 0; i < kIn; ++i) dst[i] = f32_to_bf16(row[size_t(i)]);
      } else {
        ops::quantize_row(t, row.data(), base + o * rb, kIn);
      }
    }
    TensorView v;
    v.name = "w";
    v.dtype = t;
    v.shape = {kOut, kIn};
    v.data = base;
    v.nbytes = mat;
    slot->views.push_back(v);
  }
  return *slot;
}

// state.range(0): 0 f32/widened kernels, 1 the fast kernel (bf16 or int8); range(1): threads; range(2): T;
// range(3): 0 gate-like, 1 down-like shape.
void run(benchmark::State& state, DType t) {
  const int shape = int(state.range(3));
  const int64_t kOut = kShapes[shape].out, kIn = kShapes[shape].in;
  const Weights& w = weights(t, shape);
  ThreadPool pool(int(state.range(1)));
  ops::MatmulContext ctx;
  ctx.pool = &pool;
  ctx.bf16_compute = state.range(0) == 1;
  ctx.int8_activations = state.range(0) == 1;
  const int64_t T = state.range(2);
  std::vector<float> x(size_t(T * kIn), 0.25f), y(size_t(T * kOut));
  for (auto _ : state)
    for (const TensorView& v : w.views) ops::matmul(x.data(), T, v, y.data(), ctx);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.bytes));
  state.counters["tok/s"] = benchmark::Counter(double(state.iterations() * T), benchmark::Counter::kIsRate);
  state.SetLabel(ops::describe_matmul(ctx, t).substr(0, 40));
}

void BM_MatmulBF16(benchmark::State& s) { run(s, DType::BF16); }
void BM_MatmulQ8_0(benchmark::State& s) { run(s, DType::Q8_0); }
void BM_MatmulQ4_0(benchmark::State& s) { run(s, DType::Q4_0); }

#define G4_MATMUL_ARGS ArgsProduct({{0, 1}, {1, 2}, {1, 64}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_MatmulBF16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ8_0)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_0)->G4_MATMUL_ARGS;

}  // namespace
}  // namespace g4
