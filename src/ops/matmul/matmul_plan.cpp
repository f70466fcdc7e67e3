// How a product is planned (the prefill panel, the decode streaming plan, the context made from
// them) and how each weight dtype's product is described to the user (g4 info, bench, /v1/models).
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "ops/amx/attention_bf16_tiles.h"
#include "ops/matmul/dot_kernels.h"
#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/gemm_bf16_256.h"
#include "ops/matmul/gemm_kquant.h"
#include "ops/matmul/gemm_q8.h"
#include "ops/matmul/matmul.h"
#include "ops/matmul/matmul_kinds.h"
#include "platform/row_interleave.h"

namespace g4::ops {

using namespace matmul_kinds;

TilePlan plan_matmul(const DeviceInfo& device, int64_t max_in) {
  TileProblem p;
  p.kernel = "matmul-widen";
  for (int rows = int(kMaxPanelRows); rows >= 1; rows /= 2) p.candidates.push_back({rows, 1, int(max_in)});
  p.scratch_bytes = [](const TileShape& t) { return uint64_t(t.m) * uint64_t(t.k) * 4u; };
  ScratchLimit l2 = cpu_l2_limit(device);
  l2.bytes /= 2;
  l2.what = "half of " + l2.what;
  return plan_tiles(p, l2);
}

DecodePlan plan_decode_streaming(const DeviceInfo& device) {
  DecodePlan p;
  if (device.vendor == "GenuineIntel") {
    p.streaming = {4, 4u << 10};
    p.streaming.few_prefetch_bytes = 2u << 10;
    p.streaming.few_groups = 2;
    p.reason =
        "Intel core: one stream per core leaves DRAM bandwidth unused (on an Ice Lake VM, Q4_0/Q8_0 decode "
        "products read +20-35% with prefetch 4-8 KiB ahead and another 15-20% with 4 row groups side by side; "
        "BF16 on the f32 kernels +10-15% with 8 rows per call and prefetch; bench/matmul_bench.cpp; on an AMX "
        "Xeon VM, E2B Q4_0 decoded 4-5% faster with prefetch 4 KiB ahead than 8, Q8_0 the same, 2 KiB no "
        "better, 2 streams 6% slower, g4 bench alternated; a few streams together 8 streams +11% and 2 "
        "streams +22% with prefetch 2 KiB ahead instead of 8, 1-4 KiB within 4%; on an Emerald Rapids VM without AMX, 2 row "
        "groups side by side per thread instead of 1: 8 streams' products 63.6 against 72.1 ms a step, 8 streams "
        "5.29x one stream's tok/s against 4.64x; E2B BF16 decode on VDPBF16PS with prefetch 4 KiB ahead: 97.9% and "
        "96.8% of its read pass against 86.0% and 84.8% without, alternated)";
  } else if (device.vendor == "AuthenticAMD" && !device.avx512_usable()) {
    // Zen 2/3: the 256-bit int8 kernels issue twice the instructions per weight byte of the
    // AVX-512 ones, and one stream per thread no longer keeps the memory busy.
    p.streaming = {2, 4u << 10};
    p.reason =
        "AMD core without AVX-512 (Zen 2/3): 2 streams per thread with prefetch 4 KiB ahead (on a 2-vCPU Zen 3 "
        "VM, E2B Q4_0 decode on the AVX2 int8 kernels against its paired read pass, g4 bench alternated 3 "
        "rounds: 72.8-75.4% against 69.7-70.2% for one stream without prefetch; one Q4_0 matrix of 113 MiB "
        "read 36 GB/s against 22 with prefetch 4 KiB ahead, build/g4_microbench "
        "--benchmark_filter='BM_MatmulQ4_0_R16/1/2/1/0/')";
  } else if (device.vendor == "AuthenticAMD") {
    // Past the L1d, 4 groups side by side: one activation load serves 4 groups' columns.
    const uint64_t l1d = device.caches.l1d_bytes ? device.caches.l1d_bytes : (48u << 10);
    const uint64_t l2 = device.caches.l2_bytes ? device.caches.l2_bytes : (1u << 20);
    p.streaming = {1, 0, l1d, 4, l2 / 4};
    p.reason =
        "AMD core: one stream keeps up (on Zen 5, 2 or 4 streams no faster on E2B's 14-18 KiB groups, prefetch 1 "
        "and 4 KiB ahead slower; on Zen 4, E2B-like Q4_0 layers on 2 threads, alternated: this plan 37.5 GB/s, "
        "4 streams 28.6, 4 streams with prefetch 8 KiB ahead 24.5, prefetch 4 KiB ahead 32.6); groups longer "
        "than the L1d evict the activations between groups, and there 4 "
        "groups side by side read +6% (55 KiB groups) and +13% (110 KiB) in a standalone loop; workers read a "
        "quarter of their L2 of the next product during the caller's serial steps (E2B-like decode layers with "
        "4-20 us serial gaps per product, g4's pool: 2.4-4.6% less time per layer)";
  } else {
    p.reason = "unmeasured CPU vendor '" + device.vendor + "': one stream, no software prefetch";
  }
  return p;
}

AttentionPlan plan_attention(const DeviceInfo& device) {
  AttentionPlan p;
  if (device.vendor == "GenuineIntel") {
    p.bf16_dots = false;
    p.reason =
        "Intel core: VDPBF16PS issues at half the f32 FMA's rate or less (an Emerald Rapids VM: 172 GOP/s against "
        "335 GFLOP/s on 2 threads, one E2B full layer at depth 4096 in 557 us with the K/V widened to f32 against "
        "787 us on VDPBF16PS, build/g4_microbench --benchmark_filter='AttendLayerFromCache/[03]/2/0'; an AMX Xeon: "
        "a quarter), so attention widens bf16 K/V to f32 unless AMX-BF16 tiles take it";
  } else if (!device.avx512_bf16_usable()) {
    p.bf16_dots = false;
    p.reason = "no confirmed AVX512_BF16: attention widens bf16 K/V to f32 for FMA";
  } else {
    p.reason = "VDPBF16PS (Zen 5: one E2B full layer at depth 4096 in 350-390 us on 2 threads)";
  }
  return p;
}

std::vector<ReadPassWay> read_pass_ways(const DecodeStreaming& plan) {
  std::vector<ReadPassWay> ways{{1, 0}};  // the plain read, whatever the plan
  for (int streams : {plan.groups, plan.wide_groups})
    for (uint64_t prefetch : {plan.prefetch_bytes, uint64_t(0)}) {
      const ReadPassWay way{std::max(1, streams), prefetch};
      if (std::none_of(ways.begin(), ways.end(), [&](const ReadPassWay& w) {
            return w.streams == way.streams && w.prefetch_bytes == way.prefetch_bytes;
          }))
        ways.push_back(way);
    }
  return ways;
}

namespace {

std::string prefetch_phrase(uint64_t bytes) {  // "prefetch 8 KiB ahead" / "prefetch 2304 B ahead" / "no prefetch"
  if (!bytes) return "no prefetch";
  return "prefetch " + (bytes % 1024 ? std::to_string(bytes) + " B" : std::to_string(bytes >> 10) + " KiB") + " ahead";
}
}  // namespace

std::string describe_decode_streaming(const DecodeStreaming& s) {
  std::string d = std::to_string(s.groups) + (s.groups == 1 ? " stream" : " streams") + " per thread";
  if (s.wide_group_bytes && s.wide_groups != s.groups)
    d += " (" + std::to_string(s.wide_groups) + " where a 16-row group exceeds " +
         std::to_string(s.wide_group_bytes >> 10) + " KiB)";
  d += ", " + prefetch_phrase(s.prefetch_bytes);
  if (s.warm_bytes) d += ", workers read " + std::to_string(s.warm_bytes >> 10) + " KiB of the next product ahead";
  return d;
}

std::string describe_decode_plan(const DecodePlan& p) {
  return describe_decode_streaming(p.streaming) + " (" + p.reason + ")";
}

nlohmann::json decode_plan_to_json(const DecodePlan& p) {
  return {{"streams_per_thread", p.streaming.groups},
          {"prefetch_bytes", p.streaming.prefetch_bytes},
          {"wide_group_bytes", p.streaming.wide_group_bytes},
          {"wide_streams_per_thread", p.streaming.wide_groups},
          {"warm_bytes", p.streaming.warm_bytes},
          {"few_streams_prefetch_bytes", p.streaming.few_prefetch_bytes},
          {"few_streams_groups_per_thread", p.streaming.few_groups},
          {"reason", p.reason}};
}

MatmulContext make_matmul_context(ThreadPool* pool, const DeviceInfo& device, int64_t widest_in, bool bf16_compute,
                                  bool int8_activations) {
  MatmulContext c;
  c.pool = pool;
  c.panel_rows = plan_matmul(device, widest_in).tile.m;
  c.panel_in = widest_in;
  c.bf16_compute = bf16_compute;
  c.int8_activations = int8_activations;
  c.decode = plan_decode_streaming(device).streaming;
  c.attention_bf16_dots = plan_attention(device).bf16_dots;
  // The tiles where `device` has AMX-BF16 and so does the CPU this process runs on, whose kernel
  // check passed (a preset device describing AMX never turns the tiles on elsewhere).
  if (bf16_compute && device.amx_bf16_usable() && amx_bf16_kernel_usable()) c.bf16_tiles = Bf16Tiles::Amx;
  if (int8_activations && device.amx_int8_usable() && amx_int8_kernel_usable()) c.int8_tiles = Int8Tiles::Amx;
  if (bf16_compute && device.amx_bf16_usable() && amx_attention_kernel_usable()) c.attention_tiles = Bf16Tiles::Amx;
  c.tile_block_budget = cpu_l2_limit(device).bytes / 2;
  return c;
}

namespace {

// The interleaved int8 layouts' product: the tier's instruction, decode streaming, a few streams,
// and the AMX-INT8 tiles where prefill takes them.
std::string describe_interleaved_int8(const MatmulContext& ctx, DType dtype) {
  const std::string int8_dot(int8_dot_instruction(int8_kernel_tier()));
  const bool wide_int8 = int8_kernel_tier() == Int8Dot::Avx512Vnni;
  // The K-quant kernels' own prefetch distance: on the 256-bit tiers always, on AVX512_VNNI where
  // the plan prefetches (gemm_kquant.h).
  DecodeStreaming shown = ctx.decode;
  if ((dtype == DType::Q4_K_R16 || dtype == DType::Q5_K_R16 || dtype == DType::Q6_K_R16) &&
      (shown.prefetch_bytes || !wide_int8))
    shown.prefetch_bytes = kquant_decode_prefetch_bytes(dtype == DType::Q4_K_R16   ? kQ4KColumnBytes
                                                        : dtype == DType::Q5_K_R16 ? kQ5KColumnBytes
                                                                                   : kQ6KColumnBytes);
  const bool q6_l2 = dtype == DType::Q6_K_R16 && wide_int8 && !ctx.decode.prefetch_bytes;  // into L2 instead
  if (q6_l2) shown.prefetch_bytes = kQ6KL2PrefetchBytes;
  const int few_groups = wide_int8 ? ctx.decode.few_groups : 1;
  std::string s = std::string(dtype_name(interleave_base(dtype))) +
                  " weights, 16 rows interleaved, x int8 activations (blocks of 32, f32 scales) on " + int8_dot +
                  (wide_int8 ? ", 16 rows per instruction" : ", 8 rows per instruction (two per 16-row group)") +
                  ", exact int32 block sums, f32 accumulate; decode: " + describe_decode_streaming(shown);
  if (q6_l2) s.insert(s.find(" B ahead", s.find("; decode: ")) + 8, " into L2");
  if (dtype == DType::Q8_0_R16 || dtype == DType::Q4_0_R16)
    s += "; 2-" + std::to_string(kFewTokens) + " streams decoding together: one pass, " +
         std::to_string(few_groups) + (few_groups > 1 ? " row groups" : " row group") +
         " side by side per thread, " + prefetch_phrase(ctx.decode.few_prefetch_bytes);
  if (uses_int8_tiles(ctx, dtype, kFewTokens + 1))
    s += std::string("; prefill of more than ") + std::to_string(kFewTokens) + " tokens on " +
         (ctx.int8_tiles == Int8Tiles::Amx ? "AMX-INT8 tiles (TDPBSUD; probe, tile self-test and kernel check passed)"
                                           : "a software model of AMX-INT8 tiles (tests only)") +
         ", 16 tokens x 16 rows x one block per product, then the same f32 steps: bit-identical to VPDPBUSD";
  else if (int8_tiles_take(dtype) && host_cpu().amx_int8_usable() && !amx_int8_kernel_usable())
    s += "; AMX-INT8 tiles not used: their kernel check failed: " + amx_int8_kernel_check().detail;
  return s;
}

// BF16_R16 x f32 activations on AVX2 FMA (gemm_bf16_256.h): the decode plan's streams, at most
// kBf16Decode256Groups of them.
std::string describe_bf16_256(const MatmulContext& ctx) {
  DecodeStreaming shown = ctx.decode;
  shown.groups = std::clamp(shown.groups, 1, kBf16Decode256Groups);
  shown.wide_groups = std::clamp(shown.wide_groups, 1, kBf16Decode256Groups);
  return "BF16 weights, 16 rows interleaved, widened to f32 in registers, f32 FMA (AVX2) with f32 activations, "
         "8 rows per register pair, each row an even and an odd f32 chain over the value pairs in order, then "
         "even + odd; decode: 16-row groups as " +
         describe_decode_streaming(shown) + "; prefill: tiles of 8 rows x " + std::to_string(kBf16Tile256Tokens) +
         " tokens, each step widening 8 rows' value pairs once for the tile's tokens";
}

}  // namespace

std::string describe_matmul(const MatmulContext& ctx, DType dtype) {
  const std::string target = dot_kernel_target();
  const std::string name(dtype_name(dtype));
  if (dtype == DType::BF16 && uses_bf16_kernel(ctx))
    return "BF16 weights x bf16-rounded activations on VDPBF16PS (AVX512_BF16), f32 accumulate";
  if (dtype == DType::BF16_R16 && uses_bf16_kernel(ctx) && ctx.bf16_tiles != Bf16Tiles::None)
    return std::string(
               "BF16 weights, 16 rows interleaved (each group's 32 columns one B tile), x bf16-rounded "
               "activations on ") +
           (ctx.bf16_tiles == Bf16Tiles::Amx
                ? "AMX-BF16 tiles (TDPBF16PS; probe, tile self-test and kernel check passed)"
                : "a software model of AMX-BF16 tiles (tests only)") +
           ", 32 tokens x 32 rows per step, each sum over the columns in order, every token count on the tiles; "
           "prefill in token blocks x column chunks sized to half the L2 (a pair of row groups' chunk an eighth of "
           "it), sums carried across chunks; matrices whose width is not a multiple of 32 on VDPBF16PS";
  if (dtype == DType::BF16_R16 && uses_bf16_kernel(ctx)) {
    std::string s =
        "BF16 weights, 16 rows interleaved, x bf16-rounded activations on VDPBF16PS (AVX512_BF16), 16 rows per "
        "instruction, one f32 lane per row summed over the value pairs in order; decode: " +
        std::to_string(kBf16DecodeGroups) + " 16-row groups side by side per thread, " +
        prefetch_phrase(ctx.decode.prefetch_bytes) + "; prefill: panels of 8 tokens x 32 rows";
    if (host_cpu().amx_bf16_usable() && !amx_bf16_kernel_usable())
      s += " (AMX-BF16 tiles not used: their kernel check failed: " + amx_bf16_kernel_check().detail + ")";
    return s;
  }
  if (dtype == DType::BF16_R16 && uses_bf16_256_kernel(ctx)) return describe_bf16_256(ctx);
  const std::string int8_dot(int8_dot_instruction(int8_kernel_tier()));
  if (simd_blocks(dtype) && uses_int8_kernel(ctx))
    return name + " weights x int8 activations (blocks of 32, f32 scales) on " + int8_dot +
           ", exact int32 block sums, f32 accumulate";
  if (dtype_is_kquant(dtype) && uses_int8_kernel(ctx) && int8_kernel_reads(dtype))
    return name + " super-blocks x int8 activations (blocks of 32, f32 scales) on " + int8_dot +
           ", exact int32 sums per 4 values, scaled per sub-block, f32 accumulate";
  if (dtype_is_interleaved(dtype) && dtype != DType::BF16_R16 && uses_int8_kernel(ctx))
    return describe_interleaved_int8(ctx, dtype);
  if (dtype_is_interleaved(dtype)) return name + " weights on the reference loops (one row at a time out of its group)";
  std::string s;
  if (simd_dtype(dtype))
    s = "f32 FMA on " + name + " weights widened in registers (Highway " + target +
        "), f32 accumulate; decode: " + std::to_string(float_decode_rows(ctx)) + " rows per call, " +
        prefetch_phrase(ctx.decode.prefetch_bytes) + "; prefill: panels of rows widened once";
  else if (simd_blocks(dtype))
    s = name + " blocks read directly by SIMD kernels (Highway " + target + "), f32 accumulate";
  else if (dtype_is_kquant(dtype))
    s = name + " super-blocks read directly by SIMD kernels for decode (Highway " + target +
        ", up to 4 rows per activation load), rows dequantized once for SIMD f32 dots for prefill, f32 accumulate";
  else if (other_blocks(dtype))
    s = name +
        " blocks: scalar block dots split over the threads for decode, rows dequantized once for SIMD f32 "
        "dots (Highway " +
        target + ") for prefill, f32 accumulate";
  else
    s = name + " weights on the reference loops (dequantized per row), f32 accumulate";
  if (ctx.bf16_compute && dtype == DType::BF16)
    s += " (the policy asked for bf16 compute, but this CPU has no confirmed AVX512_BF16)";
  if (ctx.int8_activations && dtype == DType::Q4_1 && gemm_q8_available())
    s += " (below what this CPU offers: no int8 kernel reads Q4_1, so its decode runs scalar block dots, several "
         "times slower than Q4_0 or Q4_K on " + int8_dot + "; --weights q4 re-encodes it for the int8 kernel)";
  if (ctx.int8_activations && int8_blocks(dtype) && !gemm_q8_available())
    s += " (the policy asked for int8 activations, but this CPU has no integer dot product)";
  return s;
}

}  // namespace g4::ops
