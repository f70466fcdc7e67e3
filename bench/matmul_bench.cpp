// Weight-product throughput on E2B-like shapes, per weight format and kernel, reported as weight
// bytes streamed per second (decode, T = 1) and tokens per second (prefill, T = 64). The matrix
// set is larger than the last-level cache, so decode figures are memory-bound when the kernel
// keeps up. For comparison against `g4 bench`'s measured read bandwidth.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "ops/matmul/matmul.h"
#include "ops/quant/quant_dot.h"
#include "platform/device.h"
#include "platform/dtype.h"
#include "platform/huge_pages.h"
#include "platform/row_interleave.h"
#include "platform/tensor_view.h"
#include "platform/thread_pool.h"

namespace g4 {
namespace {

struct Shape {
  int64_t out, in;
};
// Shape sets: 12 E2B gate-sized matrices, 12 down-sized ones (~113 MiB in Q8_0 each), 8 E2B
// decoder layers' matrices in forward order (q, k, v, o, gate+up, down, per-layer gate and
// projection), where the small products and the fork/join per product count as in decode,
// one [256, 1536] matrix that stays in L2 (the kernel's arithmetic rate without DRAM), and all 35
// of E2B's decoder layers (~700 MiB in Q4_K: sets 0-2 fit a 260 MiB L3).
std::vector<Shape> shape_set(int set) {
  if (set == 3) return {Shape{256, 1536}};
  const int layers = set == 4 ? 35 : 8;
  if (set == 0) return std::vector<Shape>(12, Shape{6144, 1536});
  if (set == 1) return std::vector<Shape>(12, Shape{1536, 6144});
  std::vector<Shape> v;
  for (int layer = 0; layer < layers; ++layer)
    for (Shape s : {Shape{2048, 1536}, Shape{256, 1536}, Shape{256, 1536}, Shape{1536, 2048}, Shape{12288, 1536},
                    Shape{1536, 6144}, Shape{256, 1536}, Shape{1536, 256}})
      v.push_back(s);
  return v;
}

struct Weights {
  HugePageBuffer buffer;
  std::vector<TensorView> views;
  uint64_t bytes = 0;
};

const Weights& weights(DType t, int set) {
  static std::vector<std::unique_ptr<Weights>> cache(128);
  auto& slot = cache[size_t(t) * 5 + size_t(set)];
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  const std::vector<Shape> shapes = shape_set(set);
  const DType base = interleave_base(t);  // interleaved formats: quantize rows, then interleave groups
  for (Shape sh : shapes) slot->bytes += row_bytes(base, sh.in) * uint64_t(sh.out);
  slot->buffer = HugePageBuffer(slot->bytes);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 0.5f);
  uint64_t offset = 0;
  for (Shape sh : shapes) {
    const int64_t kOut = sh.out, kIn = sh.in;
    const uint64_t rb = row_bytes(base, kIn), mat = rb * uint64_t(kOut);
    std::vector<float> row(static_cast<size_t>(kIn));
    std::byte* dst = slot->buffer.data() + offset;
    offset += mat;
    for (int64_t o = 0; o < kOut; ++o) {
      for (auto& v : row) v = g(rng);
      if (t == DType::BF16) {
        auto* bf = reinterpret_cast<uint16_t*>(dst + o * rb);
        for (int64_t i = 0; i < kIn; ++i) bf[i] = f32_to_bf16(row[size_t(i)]);
      } else {
        ops::quantize_row(base, row.data(), dst + o * rb, kIn);
      }
    }
    if (dtype_is_interleaved(t)) {
      std::vector<std::byte> rows(rb * uint64_t(kInterleaveRows));
      for (int64_t gi = 0; gi < kOut / kInterleaveRows; ++gi) {
        std::memcpy(rows.data(), dst + uint64_t(gi) * rows.size(), rows.size());
        interleave_group(base, rows.data(), kIn, dst + uint64_t(gi) * rows.size());
      }
    }
    TensorView v;
    v.name = "w";
    v.dtype = t;
    v.shape = {kOut, kIn};
    v.data = dst;
    v.nbytes = mat;
    slot->views.push_back(v);
  }
  return *slot;
}

// Multiply-adds of one pass of T tokens through every matrix of a set.
double macs_of(const Weights& w, int64_t T) {
  double macs = 0;
  for (const TensorView& v : w.views) macs += double(v.shape[0]) * double(v.shape[1]) * double(T);
  return macs;
}

// state.range(0): 0 f32/widened kernels, 1 the fast kernel (bf16 or int8; AMX tiles where confirmed),
// 2 the fast kernel without AMX tiles (VDPBF16PS / VPDPBUSD: the same run compares the two);
// range(1): threads; range(2): T (8: a few streams decoding together); range(3): shape set (0 gate-like, 1 down-like, 2 decoder layers, 3 in L2, 4 E2B's layers).
void run(benchmark::State& state, DType t) {
  const Weights& w = weights(t, int(state.range(3)));
  ThreadPool pool(int(state.range(1)));
  // Planned as the engine plans for E2B (widest input 12288): panels and decode streaming.
  ops::MatmulContext ctx = ops::make_matmul_context(&pool, host_cpu(), 12288, state.range(0) >= 1, state.range(0) >= 1);
  if (state.range(0) == 2) {
    ctx.bf16_tiles = ops::Bf16Tiles::None;
    ctx.int8_tiles = ops::Int8Tiles::None;
  }
  const int64_t T = state.range(2);
  std::vector<float> x(size_t(T * 12288), 0.25f), y(size_t(T * 12288));
  for (auto _ : state)
    for (const TensorView& v : w.views) ops::matmul(x.data(), T, v, y.data(), ctx);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(w.bytes));
  state.counters["tok/s"] = benchmark::Counter(double(state.iterations() * T), benchmark::Counter::kIsRate);
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * macs_of(w, T) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(ops::describe_matmul(ctx, t).substr(0, 40));
}

// The AMX-BF16 tile kernel alone, one thread, T = 512 over the decoder layers' matrices (set 2),
// the down-like ones (set 1) or the one in L2 (set 3), activations already in tile panels:
// range(0) the token block (0: the one the engine picks from the L2), range(1) the shape set,
// range(2) the column chunk (0: the engine's, -1: all columns, as before chunks; else columns).
// GOP/s against the TDPBF16PS peak.
void BM_TilesBF16(benchmark::State& state) {
  if (!ops::amx_bf16_kernel_usable()) {
    state.SkipWithError("AMX-BF16 tiles not confirmed on this CPU");
    return;
  }
  const Weights& w = weights(DType::BF16_R16, int(state.range(1)));
  const int64_t T = 512;
  std::vector<std::vector<uint16_t>> panels;  // per distinct width, in the order first met
  std::vector<int64_t> widths;
  for (const TensorView& v : w.views)
    if (std::find(widths.begin(), widths.end(), v.shape[1]) == widths.end()) {
      widths.push_back(v.shape[1]);
      std::vector<float> x(size_t(T * v.shape[1]));
      std::mt19937 rng(3);
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& e : x) e = g(rng);
      panels.emplace_back(size_t(ops::bf16_tile_panel_elements(T, v.shape[1])));
      ops::round_to_bf16_tile_panels(x.data(), 0, T, v.shape[1], panels.back().data());
    }
  std::vector<float> y(size_t(T * 12288));
  const uint64_t budget = ops::make_matmul_context(nullptr, host_cpu(), 12288, true, false).tile_block_budget;
  for (auto _ : state)
    for (const TensorView& v : w.views) {
      const size_t k = size_t(std::find(widths.begin(), widths.end(), v.shape[1]) - widths.begin());
      ops::Bf16TileBlocking b = ops::bf16_tiles_blocking(v.shape[1], budget);
      if (state.range(0)) b.token_block = state.range(0);
      if (state.range(2)) b.k_chunk = state.range(2) < 0 ? v.shape[1] : state.range(2);
      ops::gemm_bf16_tiles(ops::Bf16Tiles::Amx, panels[k].data(), T, v.shape[1], v.data, 0, v.shape[0], y.data(),
                           v.shape[0], b);
    }
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * macs_of(w, T) * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TilesBF16)
    ->ArgsProduct({{0, 32, 64, 128, 512}, {1, 2, 3}, {0, -1, 1024, 4096}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_MatmulBF16(benchmark::State& s) { run(s, DType::BF16); }
// BF16_R16: range(0) 0 f32 activations: on AVX2 CPUs without AVX-512 the AVX2 FMA kernel
// (gemm_bf16_256.h), elsewhere the reference loops (reading rows out of their groups); 1 the
// interleaved VDPBF16PS kernel.
void BM_MatmulBF16_R16(benchmark::State& s) { run(s, DType::BF16_R16); }
void BM_MatmulQ8_0(benchmark::State& s) { run(s, DType::Q8_0); }
void BM_MatmulQ4_0(benchmark::State& s) { run(s, DType::Q4_0); }
// The K-quants: range(0) 0 the f32 SIMD super-block dots, 1 the int8 tiles (gemm_kquant.h).
void BM_MatmulQ4_K(benchmark::State& s) { run(s, DType::Q4_K); }
void BM_MatmulQ5_K(benchmark::State& s) { run(s, DType::Q5_K); }
void BM_MatmulQ6_K(benchmark::State& s) { run(s, DType::Q6_K); }
void BM_MatmulQ8_0_R16(benchmark::State& s) { run(s, DType::Q8_0_R16); }
void BM_MatmulQ4_0_R16(benchmark::State& s) { run(s, DType::Q4_0_R16); }
void BM_MatmulQ4_K_R16(benchmark::State& s) { run(s, DType::Q4_K_R16); }
void BM_MatmulQ5_K_R16(benchmark::State& s) { run(s, DType::Q5_K_R16); }
void BM_MatmulQ6_K_R16(benchmark::State& s) { run(s, DType::Q6_K_R16); }

#define G4_MATMUL_ARGS ArgsProduct({{0, 1}, {1, 2}, {1, 8, 64}, {0, 1, 2, 3}})->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_MatmulBF16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulBF16_R16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ8_0)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_0)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_K)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ5_K)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ6_K)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ8_0_R16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_0_R16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ4_K_R16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ5_K_R16)->G4_MATMUL_ARGS;
BENCHMARK(BM_MatmulQ6_K_R16)->G4_MATMUL_ARGS;
// Decode (T = 1, 2 threads, the fast kernel) over all of E2B's decoder layers, beyond any L3 here:
// bytes/s to hold against `g4 bench`'s read pass.
#define G4_DECODE_E2B(fn) BENCHMARK(fn)->Name(#fn "_E2BLayers")->Args({1, 2, 1, 4})->Unit(benchmark::kMillisecond)->UseRealTime()
G4_DECODE_E2B(BM_MatmulBF16_R16);
G4_DECODE_E2B(BM_MatmulQ8_0_R16);
G4_DECODE_E2B(BM_MatmulQ4_0_R16);
G4_DECODE_E2B(BM_MatmulQ4_K_R16);
G4_DECODE_E2B(BM_MatmulQ6_K_R16);
// A 512-token prefill step's products on the fast kernels, with the AMX tiles where they are
// confirmed (1) and without (2), on the decoder layers' matrices and in L2: GOP/s against
// `g4 device --fma`'s peaks.
BENCHMARK(BM_MatmulBF16_R16)->Name("BM_Prefill512_BF16_R16")->ArgsProduct({{1, 2}, {1, 2}, {512}, {2, 3}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulQ8_0_R16)->Name("BM_Prefill512_Q8_0_R16")->ArgsProduct({{1, 2}, {1, 2}, {512}, {2, 3}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulQ4_0_R16)->Name("BM_Prefill512_Q4_0_R16")->ArgsProduct({{1, 2}, {1, 2}, {512}, {2, 3}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace g4
