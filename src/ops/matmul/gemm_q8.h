// Weight products for Q8_0 and Q4_0 weights on AVX512_VNNI (VPDPBUSD): y[T, out] = x[T, in] · Wᵀ
// with the activations quantized to int8 first, as llama.cpp does for these formats.
//
// Numerics: each token's activations are quantized in blocks of 32 (scale = absmax / 127, one
// f32 per block, values rounded to nearest even), so every block's 32 products are summed
// exactly in int32; the block sum is then scaled by (weight scale × activation scale) and
// accumulated in f32. The only error beyond the weights' own is the activation rounding (at most
// half a step, absmax/254, per value); tests/ops bound it against ref::matmul on f32 activations.
// Every output is summed in the same order whatever T, its tile or its thread, so batching and
// chunking cannot change a result (tested bit for bit).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "platform/device.h"
#include "platform/dtype.h"

namespace g4::ops {

inline constexpr int64_t kQ8Block = q8_0::kBlockValues;

// Tokens per panel of prefill activations: the interleaved prefill tile's width (gemm_q8.cpp).
inline constexpr int64_t kPanelTokens = 6;
// A few sequences decoding together (2..kFewTokens tokens) take the one-pass streaming kernel
// on every CPU, AMX or not: a tile product costs the same for 2 tokens as for 16, and the tile
// kernel walks the weights in chunks without decode's streaming (on an AMX Xeon, 2 streams on
// the tiles decoded at 0.89x one stream's aggregate, 8 at 2.86x).
inline constexpr int64_t kFewTokens = 8;

// Optional layouts of quantized activations, each read by one kernel family.
inline constexpr unsigned kQ8RowTiles = 1;  // pair_scale, q4_bias: row-major Q8_0 / Q4_0 weights
inline constexpr unsigned kQ8Panels = 2;    // panel_*: interleaved weights, T > 1
inline constexpr unsigned kQ8TokenTiles = 4;  // tile_*: Q8_0_R16 / Q4_0_R16 on AMX-INT8 tiles, T > 1

// Tokens per AMX tile of activations (gemm_q8_tiles.h): a tile register's 16 rows.
inline constexpr int64_t kTileTokens = 16;

// Quantized activations for T tokens of `in` values (in a multiple of 32).
struct Q8Activations {
  int64_t T = 0;
  int64_t in = 0;
  unsigned layouts = 0;          // kQ8RowTiles | kQ8Panels | kQ8TokenTiles: which optional layouts below are filled
  std::vector<int8_t> q;         // [T, in]
  std::vector<float> scale;      // [T, in/32]: value = q · scale
  std::vector<float> pair_scale;  // [T, pairs, 16]: lanes 0-7 block 2p's scale, lanes 8-15 block 2p+1's (0 if absent)
  std::vector<int32_t> q4_bias;   // [T, pairs, 16]: −8·Σq of block 2p in lane 0, of block 2p+1 in lane 8, else 0
  std::vector<int32_t> q8_start;  // [T, in/32]: −128·Σq per block (the interleaved kernels' offset correction)
  std::vector<int32_t> q4_start;  // [T, in/32]: −8·Σq per block
  std::vector<int32_t> q6_start;  // [T, in/32, 2]: −32·Σq of values 0-15, 16-31 (Q6_K's offset)
  // Prefill (T > 1) also packs the tokens kPanelTokens (P) at a time, the tokens the interleaved
  // kernel reads together: panel p, block b holds tokens Pp..Pp+P-1 (zeros past T) in a row.
  std::vector<int8_t> panel_q;          // [ceil(T/P), in/32, P, 32]
  std::vector<int32_t> panel_q8_start;  // [ceil(T/P), in/32, P]: q8_start
  std::vector<int32_t> panel_q4_start;  // [ceil(T/P), in/32, P]: q4_start
  std::vector<int32_t> panel_q6_start;  // [ceil(T/P), in/32, P, 2]: −32·Σq of values 0-15, 16-31 (Q6_K's offset)
  std::vector<float> panel_scale;       // [ceil(T/P), in/32, P]: scale
  // AMX-INT8 tiles (T > 1) read 16 tokens' block b as one 512-byte A tile, and the epilogue
  // reads those tokens' starts and scales of block b from one 64-byte line: token tile i, block
  // b at [i][b] below (cells past T: zeros).
  std::vector<int8_t> tile_q;          // [ceil(T/16), in/32, 16, 32]
  std::vector<int32_t> tile_q8_start;  // [ceil(T/16), in/32, 16]: q8_start
  std::vector<int32_t> tile_q4_start;  // [ceil(T/16), in/32, 16]: q4_start
  std::vector<float> tile_scale;       // [ceil(T/16), in/32, 16]: scale
  int64_t pairs() const { return (in / kQ8Block + 1) / 2; }
  // Index of token t's block b in the panel_* arrays (panel_q: times 32 bytes).
  size_t panel_cell(int64_t t, int64_t b) const {
    return size_t((t / kPanelTokens * (in / kQ8Block) + b) * kPanelTokens + t % kPanelTokens);
  }
  // Index of token t's block b in the tile_* arrays (tile_q: times 32 bytes).
  size_t tile_cell(int64_t t, int64_t b) const {
    return size_t((t / kTileTokens * (in / kQ8Block) + b) * kTileTokens + t % kTileTokens);
  }
};

// Software prefetch for the row-major tiles (R rows read side by side, rows of rb bytes): with
// ~16 instructions per 68 weight bytes of Q8_0 the out-of-order window alone keeps too few cache
// misses in flight. Each row prefetches the same column of the tile at least
// kRowTilePrefetchAhead bytes of weights later (the next tile, or the one after for short rows);
// a distance inside the row did worse (rows of 1-6 KiB end before the prefetch pays off); the
// bf16 kernel showed no gain from it.
inline constexpr uint64_t kRowTilePrefetchAhead = 6144;
inline uint64_t row_tile_prefetch_distance(uint64_t rb, int rows) {
  const uint64_t tile = rb * uint64_t(rows);
  return tile * std::max<uint64_t>(1, (kRowTilePrefetchAhead + tile - 1) / tile);
}

// One row-major int8 tile: rows w, w + rb, ... against tokens t, t + 1, ... of a, into y[c · ldy + r].
using RowTileFn = void (*)(const std::byte* w, uint64_t rb, const Q8Activations& a, int64_t t, float* y, int64_t ldy);

// The row-major int8 tiles of rows [o_begin, o_end) x tokens [0, T): up to 4 rows x up to 4
// tokens each, the tokens in blocks of 64 so that a block's activations stay in L2 while every
// row tile meets them. fn(first row, rows, first token, tokens).
template <class Fn>
void for_each_row_tile(int64_t T, int64_t o_begin, int64_t o_end, Fn fn) {
  constexpr int64_t kTokenBlock = 64;
  for (int64_t t0 = 0; t0 < T; t0 += kTokenBlock) {
    const int64_t t1 = std::min(T, t0 + kTokenBlock);
    for (int64_t o = o_begin; o < o_end; o += 4)
      for (int64_t t = t0; t < t1; t += 4) fn(o, int(std::min<int64_t>(4, o_end - o)), t, int(std::min<int64_t>(4, t1 - t)));
  }
}

// The integer dot product the int8 kernels run on (platform/device.h, Int8Dot): the host CPU's
// best confirmed one, unless lowered by G4_INT8_KERNELS=avx2|avx-vnni|none in the environment
// (read once; so an AVX-512 machine measures the AVX2 tier) or by force_int8_kernel_tier.
Int8Dot int8_kernel_tier();
// Tests and benchmarks: run the int8 kernels on `tier` from now on (nullopt: the default again).
// Throws g4::Error naming both tiers when the host did not confirm `tier`. Not while products run.
void force_int8_kernel_tier(std::optional<Int8Dot> tier);
// Whether the int8 kernels on the current tier read weights of `dtype`: Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K and their R16 layouts on every x86 tier; Q8_0 and Q4_0 on NEON (gemm_q8_neon.h). A format
// without an int8 kernel on some tier says so here; describe_matmul then names the slower path,
// and the weights are not interleaved for it (model/weight_interleave).
bool int8_kernel_reads(DType dtype);
// The instruction the int8 kernels multiply with, short, as logs name it: "VPDPBUSD" (AVX512_VNNI),
// "VPDPBUSD (AVX-VNNI)", "VPMADDUBSW+VPMADDWD" (AVX2), "SDOT" (NEON), "none".
const char* int8_kernel_instruction();
// True when the int8 kernels run on this CPU (int8_kernel_tier() is not None).
bool gemm_q8_available();
// True when they run on AVX512_VNNI: what the AVX-512 quantizer, the int8 attention kernel and
// the AMX-INT8 tiles' epilogue need.
bool gemm_q8_avx512();

// Quantizes x[T, in] (in % 32 == 0) into a: AVX-512 where the kernel is available, scalar C++
// otherwise, the two bit-identical. q, scale and the starts always; `layouts` adds what the
// kernels for the weights at hand read (gemm_q8_rows refuses activations without them).
void quantize_activations(const float* x, int64_t T, int64_t in, Q8Activations& a,
                          unsigned layouts = kQ8RowTiles | kQ8Panels);
// The same in two steps, so that token ranges can be quantized on different threads: size a
// for x[T, in] (throws g4::Error on a bad shape), then quantize tokens [t0, t1) of x into it
// (throws g4::Error unless 0 <= t0 <= t1 <= a.T).
void size_activations(int64_t T, int64_t in, unsigned layouts, Q8Activations& a);
void quantize_tokens(const float* x, int64_t t0, int64_t t1, Q8Activations& a);
// Tokens [t0, t1) of block pairs [p0, p1) (blocks 2·p0 up to 2·p1): a few tokens' blocks split
// over threads write disjoint cache lines, where a split by tokens has two threads write the
// same panel cells' lines (throws g4::Error outside the sized tokens or pairs).
void quantize_token_blocks(const float* x, int64_t t0, int64_t t1, int64_t p0, int64_t p1, Q8Activations& a);

// For tests: whether the SIMD quantizer of the current int8 tier (AVX-512 on avx512-vnni, AVX2
// on the 256-bit tiers) and the scalar one agree bit for bit on one block of 32 (true where the
// CPU has no int8 tier).
bool quantize_block_matches_scalar(const float* xb);

// Decode (one token) on interleaved rows streams `groups` 16-row groups side by side (1, 2 or 4:
// that many concurrent weight streams per thread) and, with prefetch_bytes > 0, requests each
// group's block columns that far ahead with software prefetch. A matrix whose 16-row group is
// longer than wide_group_bytes (0: none is) streams wide_groups groups side by side instead: once
// a group outgrows the L1d, the weight stream evicts the activation bytes before the next group
// reads them again, and groups side by side share each activation load.
struct DecodeStreaming {
  int groups = 1;
  uint64_t prefetch_bytes = 0;
  uint64_t wide_group_bytes = 0;
  int wide_groups = 1;
  // ops::warm_products: how many bytes of its next share each pool worker reads ahead while
  // the caller does its serial work between products (0: none).
  uint64_t warm_bytes = 0;
  // A few streams decoding together (few16): how far ahead their weights are requested into L1,
  // and how many 16-row groups each thread reads side by side (1 or 2: 2 shares each activation
  // broadcast between two groups' products).
  uint64_t few_prefetch_bytes = 8u << 10;
  int few_groups = 1;
};
// Where a decode stream's software prefetch lands: `ahead` bytes into the group it reads now, of
// `side_by_side` groups read together (each group_bytes long, one stream each). Past its group's
// end a stream continues in the group it reads next, side_by_side groups on, not in the
// neighbouring group another stream is already reading. Offset from the stream's own group.
constexpr uint64_t stream_prefetch_offset(uint64_t ahead, uint64_t group_bytes, int side_by_side) {
  return ahead + ahead / group_bytes * uint64_t(side_by_side - 1) * group_bytes;
}

// The groups side by side for a matrix whose 16-row group is `group_bytes` long.
inline int decode_groups_for(const DecodeStreaming& s, uint64_t group_bytes) {
  return s.wide_group_bytes && group_bytes > s.wide_group_bytes ? s.wide_groups : s.groups;
}

// How the interleaved kernels walk 16-row groups [g_begin, g_end) of one product. Decode (T = 1):
// decode(n, g) for n = 4, 2 or 1 groups side by side from group g, as many at a time as
// `side_by_side` allows, then the remainder. Prefill: the tokens in blocks of whole panels (~64
// tokens), and within a block each pair of groups (a last one alone) over every panel, the pair's
// block columns staying in L1/L2 while the panels pass: prefill(pair, g, t, count) for the panel
// of `count` (<= panel_tokens) tokens from t. The int8 kernels' panels are kPanelTokens wide; a
// kernel with other panels (gemm_bf16.cpp) passes its own width and token block.
inline constexpr int64_t kPrefillTokenBlock = 10 * kPanelTokens;
template <class Decode, class Prefill>
void walk_interleaved_groups(int64_t T, int64_t g_begin, int64_t g_end, int side_by_side, Decode decode, Prefill prefill,
                             int64_t panel_tokens = kPanelTokens, int64_t token_block = kPrefillTokenBlock) {
  if (T == 1) {
    int64_t g = g_begin;
    for (int n : {4, 2})
      if (side_by_side >= n)
        for (; g + n <= g_end; g += n) decode(n, g);
    for (; g < g_end; ++g) decode(1, g);
    return;
  }
  for (int64_t t0 = 0; t0 < T; t0 += token_block) {
    const int64_t t1 = std::min(T, t0 + token_block);
    for (int64_t g = g_begin; g < g_end; g += 2)
      for (int64_t t = t0; t < t1; t += panel_tokens)
        prefill(g + 1 < g_end, g, t, int(std::min<int64_t>(panel_tokens, t1 - t)));
  }
}

// y[t * ldy + o] for o in [o_begin, o_end), t in [0, a.T): Σ_i a[t, i] · w[o, i], where w holds
// rows of `dtype` blocks, a.in values each: Q8_0 or Q4_0 row-major, or Q8_0_R16 / Q4_0_R16
// (platform/row_interleave.h; then o_begin and o_end are multiples of 16), or the K-quants and
// Q4_K_R16 / Q5_K_R16 / Q6_K_R16 (gemm_kquant.h, which this forwards to). Requires gemm_q8_available().
//
// The interleaved layouts take 16 rows per VPDPBUSD (activation bytes broadcast, offset-binary
// or nibble weights as the unsigned operand, −offset·Σq as each block's starting sum) and keep
// one f32 lane per row: the same exact int32 block sums, then per block one FMA of
// sum · (weight scale × activation scale) in block order, as the row-major tiles do per pair.
// `decode`: how a one-token product on interleaved rows reads its weights (DecodeStreaming;
// ops::plan_decode_streaming says what pays on a CPU). It changes no result bits.
void gemm_q8_rows(const Q8Activations& a, const std::byte* w, DType dtype, int64_t o_begin, int64_t o_end, float* y,
                  int64_t ldy, DecodeStreaming decode = {});

}  // namespace g4::ops
