// The fast matrix product: y[T, out] = x[T, in] · Wᵀ for weights kept in their stored dtype
// (F32/BF16/F16 widened in registers; no upcast copy), output rows split across a thread pool,
// f32 accumulation. Tested against ref::matmul. Other dtypes fall back to the reference loop.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/amx/gemm_bf16_tiles.h"
#include "ops/matmul/gemm_q8.h"
#include "ops/amx/gemm_q8_tiles.h"
#include "platform/device.h"
#include "platform/fma_throughput.h"
#include "platform/tensor_view.h"
#include "platform/thread_pool.h"
#include "platform/tile_planner.h"

namespace g4::ops {

// Rows of W widened together for a multi-token product (a panel, up to 64 rows): the widened
// panel (rows x in x 4 bytes) must fit half of L2 so every token block meets it in cache.
// Throws g4::Error with the arithmetic when even one row does not fit.
TilePlan plan_matmul(const DeviceInfo& device, int64_t max_in);

struct MatmulContext {
  ThreadPool* pool = nullptr;  // null: run on the calling thread
  int panel_rows = 4;          // from plan_matmul; decode groups min(panel_rows, 4) rows
  // Policy compute = bf16: BF16 weights multiply bf16-rounded activations with VDPBF16PS
  // (gemm_bf16.h) when the CPU has it; otherwise, and for other weight dtypes, f32 FMA (BF16_R16
  // on AVX2 CPUs: gemm_bf16_256.h).
  bool bf16_compute = false;
  // Policy activations = q8: Q8_0/Q4_0 weights multiply int8-quantized activations with VPDPBUSD
  // (gemm_q8.h) when the CPU has AVX512_VNNI; otherwise f32 activations on the block kernels.
  bool int8_activations = false;
  // The input width plan_matmul sized panel_rows for (0: unknown): a narrower matrix's prefill
  // panel takes proportionally more rows, up to 64. Last, so {pool, rows, bf16, int8} still reads.
  int64_t panel_in = 0;
  // How one-token products on the interleaved int8 kernel read their weights.
  DecodeStreaming decode{};
  // BF16_R16 products on tiles (gemm_bf16_tiles.h) instead of VDPBF16PS, for every token count:
  // Amx where make_matmul_context finds AMX-BF16 confirmed and its kernel check passed;
  // Emulated only in tests (a software model of the tiles, slow).
  Bf16Tiles bf16_tiles = Bf16Tiles::None;
  // What the tiles' token blocks may hold (bf16_tiles_blocking, int8_tiles_blocking): half
  // the L2 per core, from make_matmul_context; 0 takes 64 tokens and all columns at once.
  uint64_t tile_block_budget = 0;
  // Prefill (T > 1) of Q8_0_R16 / Q4_0_R16 products on tiles (gemm_q8_tiles.h) instead of
  // VPDPBUSD; bit-identical to it, so decode stays on VPDPBUSD. Amx where make_matmul_context
  // finds AMX-INT8 confirmed and its kernel check passed; Emulated only in tests.
  Int8Tiles int8_tiles = Int8Tiles::None;
  // Attention over a bf16 cache on AMX-BF16 tiles (attention_bf16_tiles.h) instead of
  // VDPBF16PS, for every row (decode and prefill alike) of a layer whose shape fits: Amx where
  // make_matmul_context finds compute = bf16, AMX-BF16 confirmed and the attention kernel's check
  // passed; Emulated only in tests.
  Bf16Tiles attention_tiles = Bf16Tiles::None;
  // Without those tiles, whether attention over a bf16 cache under compute = bf16 takes the
  // VDPBF16PS kernel (true) or widens the K/V to f32 for FMA (false): plan_attention, per core.
  bool attention_bf16_dots = true;
};

// Whether attention's dot products run on VDPBF16PS where no AMX tiles take them, and why.
struct AttentionPlan {
  bool bf16_dots = true;
  std::string reason;
};
AttentionPlan plan_attention(const DeviceInfo& device);

// How decode's weight stream is read on this CPU (streams per thread, software prefetch), and why.
struct DecodePlan {
  DecodeStreaming streaming;
  std::string reason;
};
DecodePlan plan_decode_streaming(const DeviceInfo& device);
std::string describe_decode_streaming(const DecodeStreaming& s);  // "4 streams per thread, prefetch 8 KiB ahead"
// The plan and its reason in one line, for g4 device and g4 info.
std::string describe_decode_plan(const DecodePlan& p);
// {"streams_per_thread", "prefetch_bytes", "reason"}, for g4 device --json and g4 bench --json.
nlohmann::json decode_plan_to_json(const DecodePlan& p);

// How g4 bench's read pass (platform/bandwidth.h, time_read_pass) reads decode's bytes under
// `plan`, each way once; the best pass of them is decode's ceiling: one plain stream per thread,
// and the plan's two stream counts with its software prefetch and without. A plan whose streams
// or prefetch distance read slower than plain reads must not lower the ceiling it is held against
// (on the Zen 5 VM, 4 streams per thread everywhere read far slower than one, and a pass of that
// way alone put decode at 94-98% where one stream's pass put it at 84-87%).
struct ReadPassWay {
  int streams;
  uint64_t prefetch_bytes;
};
std::vector<ReadPassWay> read_pass_ways(const DecodeStreaming& plan);

// The context the engine and the CLI run products with on `device`: panels planned for the
// widest input (plan_matmul; throws with the arithmetic when none fits), decode prefetch planned.
MatmulContext make_matmul_context(ThreadPool* pool, const DeviceInfo& device, int64_t widest_in, bool bf16_compute,
                                  bool int8_activations);

// True when matmul with this context runs BF16 weights on the bf16 dot-product kernel.
bool uses_bf16_kernel(const MatmulContext& ctx);
// True when matmul with this context runs BF16_R16 weights on f32 activations with AVX2 FMA
// (gemm_bf16_256.h): no bf16 kernel, and gemm_bf16_256_available() (AVX2 without AVX-512).
bool uses_bf16_256_kernel(const MatmulContext& ctx);
// True when matmul with this context reads BF16_R16 weights on a kernel of their own (VDPBF16PS,
// its tiles, or the AVX2 FMA kernel): where BF16 matrices are worth interleaving at load.
bool reads_bf16_interleaved(const MatmulContext& ctx);
// True when matmul with this context runs BF16_R16 weights `in` columns wide on tiles.
bool uses_bf16_tiles(const MatmulContext& ctx, int64_t in);
// True when matmul with this context runs Q8_0/Q4_0 weights on the int8 (VNNI) kernel.
bool uses_int8_kernel(const MatmulContext& ctx);
// True when matmul with this context runs a product of T tokens of `dtype` weights on AMX-INT8
// tiles: a prefill of more than kFewTokens (gemm_q8.h) tokens; decode and a few streams stay on
// VPDPBUSD (the same bits either way).
bool uses_int8_tiles(const MatmulContext& ctx, DType dtype, int64_t T);

// The multiply-add instruction matmul's inner loop issues for weights of `dtype` with this
// context in prefill (TDPBF16PS, TDPBSUD, VDPBF16PS, VPDPBUSD, else f32 FMA): the peak `g4 bench`
// holds prefill against.
MacUnit mac_unit_of(const MatmulContext& ctx, DType dtype);

// What matmul executes for weights of `dtype` with this context, in words (for g4 info, bench,
// the server's /v1/models): never the policy's wish, always the code path taken.
std::string describe_matmul(const MatmulContext& ctx, DType dtype);

void matmul(const float* x, int64_t T, const TensorView& w, float* y, const MatmulContext& ctx);

// One of several products of the same activations: y [T, w.shape[0]] = x · wᵀ.
struct Product {
  const TensorView* w;
  float* y;
};

// matmul for each product of the same x [T, in] (e.g. q, k and v of one layer). When every
// matrix takes the same bf16 or int8 kernel, the activations are converted once and the row
// groups of all the matrices are split over the pool in one hand-off instead of one per matrix
// (decode runs a few hundred products per token; each hand-off costs microseconds). Every
// output element is computed exactly as matmul computes it, so results are bit-identical to
// separate calls. Otherwise it calls matmul once per product.
void matmul_shared_input(const float* x, int64_t T, const std::vector<Product>& products, const MatmulContext& ctx);

// Decode: what each pool worker will read first when the one-token products of `ws` (one input,
// as matmul_shared_input takes them) run next: the start of its share, up to
// ctx.decode.warm_bytes, one range per worker (ThreadPool::warm's argument). Empty when nothing
// is to be warmed: no pool or a pool of 1, warm_bytes 0, products that would not run together
// on the pool.
std::vector<ThreadPool::WarmRange> warm_ranges(const std::vector<const TensorView*>& ws, const MatmulContext& ctx);
// Hands those ranges to the workers (ThreadPool::warm) and returns at once: called right after a
// product, so the workers read the next product's weights during the caller's serial work.
void warm_products(const std::vector<const TensorView*>& ws, const MatmulContext& ctx);

}  // namespace g4::ops
