// Decode attention on one thread: one query row of G = 8 heads sharing one kv head (E2B's GQA
// group) against n cached positions in the cache's element type (f32, bf16, int8; the f32 kernel
// and the bf16 / int8 kernels where the CPU has them, the bf16 kernel on AMX-BF16 tiles where
// its check passed), for the head dims of E2B's
// sliding (256) and full (512) layers. `caches` distinct caches are visited in turn, so with
// several the keys and values come from memory rather than from a warm cache, as in a decode
// step that walks 35 layers. Reported as key positions per second, multiply-adds per second
// (q·k and p·v) and K/V bytes read per second.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <random>
#include <vector>

#include "engine/kv_cache.h"
#include "model/executor.h"
#include "model/presets.h"
#include "ops/attention/attention_bf16.h"
#include "ops/amx/attention_bf16_tiles.h"
#include "ops/attention/attention_int8.h"
#include "ops/attention/attention_kernels.h"
#include "platform/dtype.h"
#include "platform/huge_pages.h"
#include "platform/thread_pool.h"
#include "platform/quantize_int8.h"

namespace g4 {
namespace {

// state.range(0): positions; range(1): the cache and kernel (Kind); range(2): head dim;
// range(3): caches.
enum Kind { kF32 = 0, kBf16 = 1, kBf16Kernel = 2, kInt8 = 3, kInt8Kernel = 4, kBf16Tiles = 5 };

// Attention tiles are measured on the CPU's own only (the software model is a test device).
bool skip_without_attention_tiles(benchmark::State& state) {
  if (ops::amx_attention_kernel_usable()) return false;
  state.SkipWithError(("no AMX-BF16 attention tiles: " + ops::amx_attention_kernel_check().detail).c_str());
  return true;
}

void BM_AttendDecode(benchmark::State& state) {
  const int64_t n = state.range(0), G = 8, hd = state.range(2), caches = state.range(3);
  const auto kind = Kind(state.range(1));
  if (kind == kBf16Kernel && !ops::attention_bf16_available()) {
    state.SkipWithError("no confirmed AVX512_BF16 on this CPU");
    return;
  }
  if (kind == kInt8Kernel && !ops::attention_int8_available()) {
    state.SkipWithError("no confirmed AVX512_VNNI on this CPU");
    return;
  }
  if (kind == kBf16Tiles && skip_without_attention_tiles(state)) return;
  const bool bf16 = kind == kBf16 || kind == kBf16Kernel || kind == kBf16Tiles, int8 = kind == kInt8 || kind == kInt8Kernel;
  const uint64_t elem_bytes = bf16 ? 2 : int8 ? 1 : 4;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> q(size_t(G * hd));
  for (auto& x : q) x = g(rng);
  const size_t elems = size_t(n * hd);
  // In 2 MiB pages. (The engine's KV cache blocks are heap allocations on 4 KiB pages; kept in
  // 2 MiB pages instead, AttendLayerFromCache below read no faster, alternated on an Ice Lake VM.)
  const uint64_t bytes = elems * uint64_t(caches) * elem_bytes;
  HugePageBuffer kbuf(bytes), vbuf(bytes);
  std::vector<float> kscale(size_t(n * caches)), vscale(kscale.size());
  std::vector<float> row(static_cast<size_t>(hd));
  for (size_t r = 0; r < size_t(n * caches); ++r)
    for (int kv = 0; kv < 2; ++kv) {
      for (auto& x : row) x = g(rng);
      std::byte* base = (kv == 0 ? kbuf : vbuf).data() + r * size_t(hd) * elem_bytes;
      if (bf16) {
        for (size_t i = 0; i < row.size(); ++i) reinterpret_cast<uint16_t*>(base)[i] = f32_to_bf16(row[i]);
      } else if (int8) {
        (kv == 0 ? kscale : vscale)[r] = quantize_int8_symmetric(row.data(), hd, reinterpret_cast<int8_t*>(base));
      } else {
        std::memcpy(base, row.data(), row.size() * 4);
      }
    }
  const ops::KvElem elem = bf16 ? ops::KvElem::BF16 : int8 ? ops::KvElem::I8 : ops::KvElem::F32;
  std::vector<ops::KvSpan> spans;
  for (int64_t c = 0; c < caches; ++c)
    spans.push_back({elem, n, kbuf.data() + size_t(c) * elems * elem_bytes, vbuf.data() + size_t(c) * elems * elem_bytes,
                     int8 ? kscale.data() + c * n : nullptr, int8 ? vscale.data() + c * n : nullptr});
  std::vector<float> o(static_cast<size_t>(G * hd)), m(static_cast<size_t>(G)), l(static_cast<size_t>(G));
  int64_t c = 0;
  for (auto _ : state) {
    const ops::KvSpans ks{&spans[size_t(c)], 1, 1, hd};
    if (kind == kBf16Kernel)
      ops::attend_partial_bf16(q.data(), G, ks, 0, 0, n, o.data(), m.data(), l.data());
    else if (kind == kBf16Tiles)
      ops::attend_partial_bf16_tiles(ops::Bf16Tiles::Amx, q.data(), G, ks, 0, 0, n, o.data(), m.data(), l.data());
    else if (kind == kInt8Kernel)
      ops::attend_partial_int8(q.data(), G, ks, 0, 0, n, o.data(), m.data(), l.data());
    else
      ops::attend_partial(q.data(), G, ks, 0, 0, n, o.data(), m.data(), l.data());
    benchmark::DoNotOptimize(o.data());
    c = (c + 1) % caches;
  }
  const double it = double(state.iterations());
  state.counters["positions/s"] = benchmark::Counter(it * double(n), benchmark::Counter::kIsRate);
  state.counters["MAC/s"] = benchmark::Counter(it * double(n * G * hd * 2), benchmark::Counter::kIsRate);
  state.counters["KV bytes/s"] =
      benchmark::Counter(it * double(n * hd * 2) * double(elem_bytes), benchmark::Counter::kIsRate);
}
// Warm (one cache) and from memory (16 caches: 64-256 MiB) at a sliding layer's window and at depth 4096.
BENCHMARK(BM_AttendDecode)
    ->ArgsProduct({{512, 4096}, {kF32, kBf16, kBf16Kernel, kInt8, kInt8Kernel, kBf16Tiles}, {256, 512}, {1, 16}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace g4

namespace g4 {
namespace {

// One attention layer of E2B at depth 4096 as the cached forward pass runs it: the K/V in a
// KvCache (64-position blocks on the heap for a full layer, the 512-slot ring for a sliding one),
// split into slices of blocks::Exec's attention_slice keys (256) claimed by the pool's threads
// one at a time (forward_cached.cpp's work items), then merged (attend_merge_finish). Six
// sequences' caches of E2B's owning layers of that type are visited in turn (full: 18 caches,
// 72-144 MiB; sliding: 72 rings, 18-36 MiB), so the keys come from memory or L3.
// state.range(0): the cache and kernel (Cache: the f32 kernel over a bf16 or f16 cache, the int8
// kernel, the bf16 kernel, the bf16 kernel on AMX-BF16 tiles); range(1): threads; range(2): 0 a full layer (4096 keys), 1 a sliding
// one (the last 512).
enum Cache { kBf16Cache = 0, kInt8Cache = 1, kF16Cache = 2, kBf16CacheKernel = 3, kBf16CacheTiles = 4 };
void BM_AttendLayerFromCache(benchmark::State& state) {
  const auto cache = Cache(state.range(0));
  const bool int8 = cache == kInt8Cache, bf16_kernel = cache == kBf16CacheKernel, tiles = cache == kBf16CacheTiles,
             sliding = state.range(2) == 1;
  if (tiles && skip_without_attention_tiles(state)) return;
  const int threads = int(state.range(1));
  if (int8 && !ops::attention_int8_available()) {
    state.SkipWithError("no confirmed AVX512_VNNI on this CPU");
    return;
  }
  if (bf16_kernel && !ops::attention_bf16_available()) {
    state.SkipWithError("no confirmed AVX512_BF16 on this CPU");
    return;
  }
  const ModelConfig c = preset_config("e2b");
  constexpr int64_t kDepth = 4096;
  const int64_t slice = blocks::Exec{}.attention_slice;  // the forward pass's default
  KvCacheOptions ko;
  ko.dtype = int8 ? KvDType::Int8 : cache == kF16Cache ? KvDType::F16 : KvDType::BF16;
  ko.max_total_tokens = 8 * (kDepth + 64);
  KvCache kv(c, ko);
  const LayerType type = sliding ? LayerType::Sliding : LayerType::Full;
  std::vector<std::pair<int, int>> caches;  // (sequence, layer)
  for (int s = 0; s < 6; ++s) {
    const int seq = kv.add_sequence();
    kv.fill_for_benchmark(seq, kDepth, 42 + uint64_t(s));
    for (size_t i = 0; i < c.layers.size(); ++i)
      if (c.layers[i].type == type && !c.layers[i].kv_shared) caches.emplace_back(seq, int(i));
  }
  const int64_t hd = c.layers[size_t(caches[0].second)].head_dim, G = c.num_attention_heads;
  const int64_t first = sliding ? kDepth - c.sliding_window : 0, n = kDepth - first;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> q(size_t(G * hd)), out(q.size());
  for (auto& x : q) x = g(rng);
  const int64_t items = (n + slice - 1) / slice;
  const size_t st = size_t(G * hd + 2 * G);
  std::vector<float> partial(size_t(items) * st);
  ThreadPool pool(threads);
  size_t next = 0;
  for (auto _ : state) {
    const auto [seq, layer] = caches[next];
    next = (next + 1) % caches.size();
    std::vector<ops::KvSpan> spans;
    kv.view(layer, seq, first, kDepth, spans);
    const ops::KvSpans ks{spans.data(), spans.size(), 1, hd};
    std::atomic<int64_t> next_item{0};
    pool.parallel_for(threads, [&](int64_t, int64_t, int) {
      for (int64_t i = next_item.fetch_add(1); i < items; i = next_item.fetch_add(1)) {
        float* o = &partial[size_t(i) * st];
        const int64_t b = i * slice, e = std::min(n, b + slice);
        if (int8)
          ops::attend_partial_int8(q.data(), G, ks, 0, b, e, o, o + G * hd, o + G * hd + G);
        else if (bf16_kernel)
          ops::attend_partial_bf16(q.data(), G, ks, 0, b, e, o, o + G * hd, o + G * hd + G);
        else if (tiles)
          ops::attend_partial_bf16_tiles(ops::Bf16Tiles::Amx, q.data(), G, ks, 0, b, e, o, o + G * hd, o + G * hd + G);
        else
          ops::attend_partial(q.data(), G, ks, 0, b, e, o, o + G * hd, o + G * hd + G);
      }
    });
    ops::attend_merge_finish(G, hd, partial.data(), st, items, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["positions/s"] = benchmark::Counter(double(state.iterations()) * double(n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttendLayerFromCache)
    ->ArgsProduct({{kBf16Cache, kInt8Cache, kF16Cache, kBf16CacheKernel, kBf16CacheTiles}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace g4
