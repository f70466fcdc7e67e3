#include "ops/matmul/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/amx/attention_bf16_tiles.h"
#include "ops/matmul/dot_kernels.h"
#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/gemm_bf16_256.h"
#include "ops/matmul/gemm_kquant.h"
#include "ops/matmul/gemm_q8.h"
#include "ops/matmul/kquant_dot_kernels.h"
#include "ops/matmul/matmul_kinds.h"
#include "ops/quant/quant_dot.h"
#include "ops/ref/reference_ops.h"
#include "platform/aligned_rows.h"
#include "platform/row_interleave.h"

namespace g4::ops {

using namespace matmul_kinds;

namespace {

// Scratch for a prefill panel of `rows` f32 rows of `in` values: rows 64-byte aligned (stride
// rounded up to 16 floats), so dot_panel's loads never span two cache lines. Returns the stride.
size_t panel_scratch(std::vector<float>& v, int64_t rows, int64_t in, float** data) {
  size_t ld = 0;
  *data = aligned_rows(v, size_t(rows), size_t(in), ld);
  return ld;
}

// Block-quantized rows in groups of `group` (at most 4): every token reads the packed blocks
// directly (SIMD for Q8_0/Q4_0 and the K-quants, scalar quant_dot for Q4_1), the rows sharing each
// load of x. Prefill too, token by token over the group's rows (in L1 after the first token): a
// dequantized panel (dot_panel) sums in another order than the block dots, so a token's logits
// would depend on whether it was decoded alone or prefilled with others.
void matmul_rows_blocks(const float* x, int64_t T, const TensorView& w, float* y, int64_t o_begin, int64_t o_end,
                        int group, std::vector<float>& /*scratch: unused*/, size_t /*prefetch: the block dots take none*/) {
  const int64_t out = w.shape[0], in = w.shape[1];
  const uint64_t rb = row_bytes(w.dtype, in);
  const bool simd = simd_blocks(w.dtype);
  float tmp[4];
  for (int64_t o = o_begin; o < o_end; o += group) {
    const int rows = int(std::min<int64_t>(group, o_end - o));
    for (int64_t t = 0; t < T; ++t) {
      if ((simd && dot_rows_blocks(x + t * in, w.data + uint64_t(o) * rb, rb, w.dtype, size_t(in), rows, tmp)) ||
          dot_rows_kquant(x + t * in, w.data + uint64_t(o) * rb, rb, w.dtype, size_t(in), rows, tmp)) {
        for (int r = 0; r < rows; ++r) y[t * out + o + r] = tmp[r];
        continue;
      }
      for (int r = 0; r < rows; ++r) {
        const std::byte* row = w.data + uint64_t(o + r) * rb;
        float& dst = y[t * out + o + r];
        if (!(simd && dot_row_blocks(x + t * in, row, w.dtype, size_t(in), &dst))) dst = quant_dot(w.dtype, row, x + t * in, in);
      }
    }
  }
}

// Output rows [o_begin, o_end) for all T tokens, in groups of `group` rows: for decode up to 8
// rows per dot_rows call (one weight stream each, `prefetch` bytes ahead as ctx.decode says); for
// prefill a panel (plan_matmul sizes it to half of L2) that every token block meets while it is
// in cache. Without panels, prefill re-reads all T activation rows from L3 for every 4 weight
// rows and runs far below the core's FMA peak.
void matmul_rows(const float* x, int64_t T, const TensorView& w, float* y, int64_t o_begin, int64_t o_end, int group,
                 std::vector<float>& scratch, size_t prefetch) {
  const int64_t out = w.shape[0], in = w.shape[1];
  const size_t esz = dtype_size(w.dtype);
  float tmp[kMaxDotRows];
  for (int64_t o = o_begin; o < o_end; o += group) {
    const int rows = int(std::min<int64_t>(group, o_end - o));
    const std::byte* wr = w.data + size_t(o * in) * esz;
    if (T <= 2) {
      for (int64_t t = 0; t < T; ++t) {
        dot_rows(x + t * in, wr, w.dtype, size_t(in), size_t(in), rows, tmp, prefetch);
        for (int r = 0; r < rows; ++r) y[t * out + o + r] = tmp[r];
      }
      continue;
    }
    // Prefill: the panel widened (F32: copied) once into aligned rows, then every token against it.
    float* panel;
    const size_t ld = panel_scratch(scratch, rows, in, &panel);
    for (int r = 0; r < rows; ++r) widen_row(wr + size_t(r * in) * esz, w.dtype, size_t(in), panel + r * ld);
    dot_panel(x, size_t(T), size_t(in), panel, ld, size_t(rows), y + o, size_t(out));
  }
}

}  // namespace

bool uses_bf16_kernel(const MatmulContext& ctx) { return ctx.bf16_compute && gemm_bf16_available(); }
bool uses_bf16_256_kernel(const MatmulContext& ctx) { return !uses_bf16_kernel(ctx) && gemm_bf16_256_available(); }
bool reads_bf16_interleaved(const MatmulContext& ctx) { return uses_bf16_kernel(ctx) || uses_bf16_256_kernel(ctx); }
bool uses_int8_kernel(const MatmulContext& ctx) { return ctx.int8_activations && gemm_q8_available(); }
bool uses_bf16_tiles(const MatmulContext& ctx, int64_t in) {
  return uses_bf16_kernel(ctx) && ctx.bf16_tiles != Bf16Tiles::None && bf16_tiles_fit(in);
}
bool uses_int8_tiles(const MatmulContext& ctx, DType dtype, int64_t T) {
  return T > kFewTokens && uses_int8_kernel(ctx) && ctx.int8_tiles != Int8Tiles::None && int8_tiles_take(dtype);
}

namespace {

// The chunk for_each_chunk deals `units` in (also where ops::warm_ranges finds each share).
int64_t chunk_for(const ThreadPool& pool, int64_t units, int64_t align) {
  const int64_t even = std::max<int64_t>(1, units / (int64_t(pool.size()) * 8));
  return (even + align - 1) / align * align;
}

// Units [0, units) over the pool in chunks of about 1/8 of a thread's share
// (ThreadPool::parallel_chunks: contiguous shares, so each thread's weight streams run on from
// chunk to chunk, and a thread done early takes chunks from the others instead of waiting at the
// join: decode's products are memory-bound, and how the bandwidth divides between the threads
// varies from product to product). Pieces shrink near the end of each share (parallel_chunks),
// so the threads meet at the join within about one `align` rather than wait there. Pieces are
// whole multiples of `align` units (the kernel's widest tile), so none ends in narrower tiles
// except where the units do. fn(unit_begin, unit_end).
template <class Fn>
void for_each_chunk(ThreadPool& pool, int64_t units, Fn fn, int64_t align = 1) {
  pool.parallel_chunks(units, chunk_for(pool, units, align), [&](int64_t b, int64_t e, int) { fn(b, e); }, align);
}

// Rows per prefill panel for a matrix of `in` columns: the planned panel's bytes
// (panel_rows x panel_in x 4) hold proportionally more rows of a narrower matrix.
int panel_rows_for(const MatmulContext& ctx, int64_t in) {
  const int64_t planned = std::max(1, ctx.panel_rows);
  if (ctx.panel_in <= 0 || in <= 0) return int(planned);
  return int(std::clamp<int64_t>(planned * ctx.panel_in / in, planned, kMaxPanelRows));
}

// Products with fewer output rows than this run on the calling thread: waking the pool costs more.
constexpr int64_t kMinParallelRows = 64;
// Fewest activation values whose conversion (int8 or bf16) is split over the pool: from here
// converting them on one core takes several pool round trips (BM_PoolHandOff).
constexpr int64_t kMinParallelConvert = 16384;
// Up to this many tokens the activations are split over the pool by block pairs, not by tokens.
constexpr int64_t kFewTokenActivations = 16;

// Output rows [0, out) in units of `group` rows (each thread's range stays group-aligned, so
// tiles fall on the same rows whatever the split), over the pool when there is one and the
// product is worth it; fn(o_begin, o_end).
template <class Fn>
void split_rows(const MatmulContext& ctx, int64_t out, int group, Fn fn) {
  if (!ctx.pool || ctx.pool->size() == 1 || out < kMinParallelRows) {
    fn(int64_t(0), out);
    return;
  }
  const int64_t units = (out + group - 1) / group;
  for_each_chunk(*ctx.pool, units, [&](int64_t ub, int64_t ue) { fn(ub * group, std::min(out, ue * group)); });
}

// Which fast kernel a product takes (None: anything else). Bf16F32: BF16_R16 weights x f32
// activations on AVX2 FMA (gemm_bf16_256.h).
enum class FastKernel { None, Bf16, Int8, Bf16F32 };

FastKernel fast_kernel_of(const TensorView& w, const MatmulContext& ctx) {
  if (w.shape.size() != 2) return FastKernel::None;
  if (dtype_is_interleaved(w.dtype)) {
    if (w.shape[0] % kInterleaveRows) return FastKernel::None;
    if (interleave_base(w.dtype) == DType::BF16)
      return uses_bf16_kernel(ctx) ? FastKernel::Bf16 : uses_bf16_256_kernel(ctx) ? FastKernel::Bf16F32 : FastKernel::None;
    return uses_int8_kernel(ctx) && int8_kernel_reads(w.dtype) ? FastKernel::Int8 : FastKernel::None;
  }
  if (w.dtype == DType::BF16) return uses_bf16_kernel(ctx) ? FastKernel::Bf16 : FastKernel::None;
  if (int8_blocks(w.dtype) && w.shape[1] % dtype_block_size(w.dtype) == 0 && uses_int8_kernel(ctx) &&
      int8_kernel_reads(w.dtype))
    return FastKernel::Int8;
  return FastKernel::None;
}

// The row groups of products run together on one fast kernel (the kernel's tile height: 16
// interleaved rows, else 4) laid end to end: unit u of product i covers rows
// [(u - first[i]) · group[i], ...); and the pool's chunk alignment for them at T tokens.
struct UnitLayout {
  std::vector<int64_t> first;  // [products + 1]: first unit of each product, then the total
  std::vector<int> group;      // rows per unit, per product
  int64_t rows = 0;
  int64_t align = 1;
};

UnitLayout layout_units(std::span<const Product> products, int64_t T, FastKernel kernel, const MatmulContext& ctx) {
  UnitLayout l;
  l.first.assign(products.size() + 1, 0);
  l.group.resize(products.size());
  for (size_t i = 0; i < products.size(); ++i) {
    const TensorView& w = *products[i].w;
    l.group[i] = dtype_is_interleaved(w.dtype) ? int(kInterleaveRows) : 4;
    l.first[i + 1] = l.first[i] + (w.shape[0] + l.group[i] - 1) / l.group[i];
    l.rows += w.shape[0];
  }
  // Interleaved int8 tiles: the decode streaming's groups side by side for decode (the products of
  // one call share their input width, so their groups are equally long), 2 for prefill.
  const bool interleaved = std::all_of(l.group.begin(), l.group.end(), [](int g) { return g == int(kInterleaveRows); });
  const uint64_t group_bytes =
      uint64_t(kInterleaveRows) * row_bytes(interleave_base(products[0].w->dtype), products[0].w->shape[1]);
  if (kernel == FastKernel::Int8 && interleaved) l.align = T == 1 ? std::max(1, decode_groups_for(ctx.decode, group_bytes)) : 2;
  if (kernel == FastKernel::Bf16 && interleaved)
    l.align = T == 1 && !uses_bf16_tiles(ctx, products[0].w->shape[1]) ? kBf16DecodeGroups : 2;
  if (kernel == FastKernel::Bf16F32) l.align = T == 1 ? bf16_256_decode_groups(ctx, group_bytes) : 2;
  return l;
}

// x [T, in] rounded to bf16 into xb, laid out as the tiles read it (`tiles`) or row-major; over
// the pool by tokens when `split`.
void round_for(const float* x, int64_t T, int64_t in, bool tiles, bool split, const MatmulContext& ctx,
               std::vector<uint16_t>& xb) {
  xb.resize(size_t(tiles ? bf16_tile_panel_elements(T, in) : T * in));
  uint16_t* const rounded = xb.data();
  auto convert = [&](int64_t t0, int64_t t1) {
    if (tiles)
      round_to_bf16_tile_panels(x, t0, t1, in, rounded);
    else
      round_rows_to_bf16(x + t0 * in, (t1 - t0) * in, rounded + t0 * in);
  };
  if (split)
    ctx.pool->parallel_for(T, [&](int64_t b, int64_t e, int) { convert(b, e); });
  else
    convert(0, T);
}

// x [T, in] into xq in the layouts the products' kernels read; over the pool when `split`.
void quantize_for(const float* x, int64_t T, std::span<const Product> products, bool split, const MatmulContext& ctx,
                  Q8Activations& xq) {
  const int64_t in = products[0].w->shape[1];
  unsigned layouts = 0;
  for (const Product& p : products)
    layouts |= uses_int8_tiles(ctx, p.w->dtype, T) ? kQ8TokenTiles
               : dtype_is_interleaved(p.w->dtype)        ? kQ8Panels
                                                         : kQ8RowTiles;
  size_activations(T, in, layouts, xq);
  // A few tokens (decoding streams) split by block pairs: by tokens, the two threads' cells of
  // one block share cache lines in the panels and the starts, and the lines ping-pong.
  const int64_t pairs = (in / kQ8Block + 1) / 2;
  if (split && T <= kFewTokenActivations)
    ctx.pool->parallel_for(pairs, [&](int64_t b, int64_t e, int) { quantize_token_blocks(x, 0, T, b, e, xq); });
  else if (split)
    ctx.pool->parallel_for(T, [&](int64_t b, int64_t e, int) { quantize_tokens(x, b, e, xq); });
  else
    quantize_tokens(x, 0, T, xq);
}

// Whether products of one input run together on one fast kernel (run_fast), and which.
FastKernel shared_kernel_of(std::span<const Product> products, const MatmulContext& ctx) {
  if (products.empty()) return FastKernel::None;
  const FastKernel kernel = fast_kernel_of(*products[0].w, ctx);
  for (const Product& p : products)
    if (fast_kernel_of(*p.w, ctx) != kernel || p.w->shape[1] != products[0].w->shape[1]) return FastKernel::None;
  return kernel;
}

// Products of one input x [T, in] on one fast kernel (BF16 weights on VDPBF16PS: activations
// rounded to bf16; Q8_0/Q4_0, row-major or interleaved, on VPDPBUSD: activations quantized to
// int8; BF16_R16 on AVX2 FMA: the f32 activations as they are). The activations are converted
// once; the units (layout_units) of all the matrices are split over the pool in one hand-off.
void run_fast(const float* x, int64_t T, std::span<const Product> products, FastKernel kernel, const MatmulContext& ctx) {
  const int64_t in = products[0].w->shape[1];
  const UnitLayout layout = layout_units(products, T, kernel, ctx);
  const std::vector<int64_t>& first = layout.first;
  const std::vector<int>& group = layout.group;
  thread_local std::vector<uint16_t> xb;
  // Quantized activations kept per thread and per input width: one buffer resized between a
  // layer's widths (E2B: 1536, 2048, 256 and 6144 or 12288) zero-filled its growth on every
  // product, ~10 MB per layer of a 512-token step. A handful of widths is all a model has.
  thread_local std::vector<std::pair<int64_t, std::unique_ptr<Q8Activations>>> by_width;
  auto width = std::find_if(by_width.begin(), by_width.end(), [&](const auto& e) { return e.first == in; });
  if (width == by_width.end()) {
    if (by_width.size() >= 8) by_width.erase(by_width.begin());  // oldest first
    by_width.emplace_back(in, std::make_unique<Q8Activations>());
    width = by_width.end() - 1;
  }
  Q8Activations& xq = *width->second;
  // Converting a prefill step's activations would otherwise leave the pool idle: split over the
  // pool by tokens when there is enough of it to pay for the hand-off.
  const bool split = ctx.pool && ctx.pool->size() > 1 && T > 1 && T * in >= kMinParallelConvert;
  // BF16_R16 products on the tiles read the activations laid out as tiles (gemm_bf16_tiles.h);
  // every product of this call must be one, as the rounded activations take one layout.
  const bool tiles = kernel == FastKernel::Bf16 && uses_bf16_tiles(ctx, in) &&
                     std::all_of(group.begin(), group.end(), [](int g) { return g == int(kInterleaveRows); });
  if (kernel == FastKernel::Bf16)
    round_for(x, T, in, tiles, split, ctx, xb);
  else if (kernel == FastKernel::Int8)
    quantize_for(x, T, products, split, ctx, xq);
  const int side_by_side = kernel == FastKernel::Bf16F32 ? bf16_256_decode_groups(ctx, uint64_t(32 * in)) : 1;
  // Named outside the lambda: inside it, a thread_local would be the worker thread's own copy.
  const uint16_t* const xbp = xb.data();
  const Q8Activations& xa = xq;
  auto run_units = [&](int64_t ub, int64_t ue) {
    for (size_t i = 0; i < products.size(); ++i) {
      const int64_t b = std::max(ub, first[i]), e = std::min(ue, first[i + 1]);
      if (b >= e) continue;
      const TensorView& w = *products[i].w;
      const int64_t out = w.shape[0], r0 = (b - first[i]) * group[i], r1 = std::min(out, (e - first[i]) * group[i]);
      if (kernel == FastKernel::Bf16F32)
        gemm_bf16_256_rows(x, T, in, w.data, r0, r1, products[i].y, out, side_by_side, ctx.decode.prefetch_bytes);
      else if (tiles)
        gemm_bf16_tiles(ctx.bf16_tiles, xbp, T, in, w.data, r0, r1, products[i].y, out,
                        ctx.tile_block_budget ? bf16_tiles_blocking(in, ctx.tile_block_budget) : Bf16TileBlocking{});
      else if (kernel == FastKernel::Bf16 && group[i] == int(kInterleaveRows))
        gemm_bf16_interleaved_rows(xbp, T, in, w.data, r0, r1, products[i].y, out, kBf16DecodeGroups,
                                   ctx.decode.prefetch_bytes);
      else if (kernel == FastKernel::Bf16)
        gemm_bf16_rows(xbp, T, in, reinterpret_cast<const uint16_t*>(w.data), r0, r1, products[i].y, out);
      else if (uses_int8_tiles(ctx, w.dtype, T))
        gemm_q8_tiles(ctx.int8_tiles, xa, w.data, w.dtype, r0, r1, products[i].y, out,
                      ctx.tile_block_budget ? int8_tiles_blocking(in, ctx.tile_block_budget) : Int8TileBlocking{});
      else
        gemm_q8_rows(xa, w.data, w.dtype, r0, r1, products[i].y, out, ctx.decode);
    }
  };
  if (!ctx.pool || ctx.pool->size() == 1 || layout.rows < kMinParallelRows) {
    run_units(0, first.back());
    return;
  }
  for_each_chunk(*ctx.pool, first.back(), run_units, layout.align);
}

}  // namespace

MacUnit mac_unit_of(const MatmulContext& ctx, DType dtype) {
  TensorView v;  // a shape every kernel takes whole: 16 rows, 256 columns
  v.dtype = dtype;
  v.shape = {kInterleaveRows, 256};
  switch (fast_kernel_of(v, ctx)) {
    case FastKernel::Bf16: return dtype == DType::BF16_R16 && uses_bf16_tiles(ctx, 256) ? MacUnit::Bf16Tile : MacUnit::Bf16Dot;
    case FastKernel::Int8:
      if (uses_int8_tiles(ctx, dtype, kFewTokens + 1)) return MacUnit::Int8Tile;
      return int8_kernel_tier() == Int8Dot::Avx2      ? MacUnit::Int8Madd
             : int8_kernel_tier() == Int8Dot::AvxVnni ? MacUnit::Int8Dot256
             : int8_kernel_tier() == Int8Dot::NeonDot ? MacUnit::Int8Sdot
                                                      : MacUnit::Int8Dot;
    case FastKernel::Bf16F32:
    case FastKernel::None: break;
  }
  return MacUnit::F32Fma;
}

void matmul_shared_input(const float* x, int64_t T, const std::vector<Product>& products, const MatmulContext& ctx) {
  if (products.empty()) return;
  const FastKernel kernel = shared_kernel_of(products, ctx);
  if (kernel == FastKernel::None) {
    for (const Product& p : products) matmul(x, T, *p.w, p.y, ctx);
    return;
  }
  run_fast(x, T, products, kernel, ctx);
}

std::vector<ThreadPool::WarmRange> warm_ranges(const std::vector<const TensorView*>& ws, const MatmulContext& ctx) {
  std::vector<Product> products;
  for (const TensorView* w : ws) products.push_back({w, nullptr});
  const FastKernel kernel = shared_kernel_of(products, ctx);
  if (!ctx.pool || ctx.pool->size() == 1 || ctx.decode.warm_bytes == 0 || kernel == FastKernel::None) return {};
  const UnitLayout layout = layout_units(products, 1, kernel, ctx);
  if (layout.rows < kMinParallelRows) return {};  // runs on the calling thread
  const int64_t units = layout.first.back(), chunk = chunk_for(*ctx.pool, units, layout.align);
  const int64_t in = ws[0]->shape[1];
  std::vector<ThreadPool::WarmRange> ranges;
  for (int t = 1; t < ctx.pool->size(); ++t) {
    // Worker t's share starts here (ThreadPool::parallel_chunks): its first bytes, in the
    // product that holds them, up to warm_bytes.
    const int64_t u = ThreadPool::share_begin(units, chunk, ctx.pool->size(), t);
    ThreadPool::WarmRange r;
    for (size_t i = 0; i < ws.size() && u < units; ++i) {
      if (u >= layout.first[i + 1]) continue;
      const TensorView& w = *ws[i];
      const uint64_t offset = uint64_t(u - layout.first[i]) * uint64_t(layout.group[i]) * row_bytes(interleave_base(w.dtype), in);
      if (offset < w.nbytes) r = {w.data + offset, size_t(std::min<uint64_t>(ctx.decode.warm_bytes, w.nbytes - offset))};
      break;
    }
    ranges.push_back(r);
  }
  return ranges;
}

void warm_products(const std::vector<const TensorView*>& ws, const MatmulContext& ctx) {
  const std::vector<ThreadPool::WarmRange> ranges = warm_ranges(ws, ctx);
  if (!ranges.empty()) ctx.pool->warm(ranges);
}

void matmul(const float* x, int64_t T, const TensorView& w, float* y, const MatmulContext& ctx) {
  if (const FastKernel kernel = fast_kernel_of(w, ctx); kernel != FastKernel::None) {
    const Product one{&w, y};
    run_fast(x, T, std::span<const Product>(&one, 1), kernel, ctx);
    return;
  }
  // Interleaved rows exist only for the int8, VDPBF16PS and AVX2 BF16_R16 kernels
  // (model/weight_interleave.h); without them the reference loops read them a row at a time
  // (correct, slow).
  if (dtype_is_interleaved(w.dtype)) {
    ref::matmul(x, T, w, y);
    return;
  }
  const bool blocks = (simd_blocks(w.dtype) || other_blocks(w.dtype)) && w.shape.size() == 2 &&
                     w.shape[1] % dtype_block_size(w.dtype) == 0;
  if (!simd_dtype(w.dtype) && !blocks) {
    ref::matmul(x, T, w, y);
    return;
  }
  auto rows_fn = blocks ? matmul_rows_blocks : matmul_rows;
  // Blocks: up to 4 rows per call (the block kernels' limit), decode and prefill alike. Float
  // kernels: for decode as many concurrent row streams as ctx.decode plans, up to 8; prefill a panel.
  const int decode_rows = blocks ? std::clamp(ctx.panel_rows, 1, 4) : float_decode_rows(ctx);
  const int group = T <= 2 || blocks ? decode_rows : panel_rows_for(ctx, w.shape[1]);
  const size_t prefetch = size_t(ctx.decode.prefetch_bytes);
  split_rows(ctx, w.shape[0], group, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> scratch;
    rows_fn(x, T, w, y, b, e, group, scratch, prefetch);
  });
}

}  // namespace g4::ops
