// GpuDecoder's state, shared by its two halves: vk_decoder.cpp (weights, pipelines, buffers)
// and vk_decoder_step.cpp (recording and submitting a step).
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "gpu/shader_tiles.h"
#include "gpu/vulkan/vk_buffer.h"
#include "gpu/vulkan/vk_decoder.h"
#include "gpu/vulkan/vk_pipeline.h"

namespace g4::gpu::decoder {

using Place = DeviceBuffer::Place;
using Buf = std::unique_ptr<DeviceBuffer>;
constexpr uint32_t kWg = 64;  // element-wise shaders: no shared memory, any size the device allows

inline uint32_t groups(uint64_t n, uint32_t wg) { return uint32_t((n + wg - 1) / wg); }

// Push-constant blocks, in each shader's order.
struct MatmulPush { uint32_t T, N, K; };
struct EmbedPush { uint32_t T, width; float scale; };
struct NormPush { uint32_t rows, n; float eps; uint32_t weighted; };
struct RopePush { uint32_t T, heads, hd; };
struct KvPush { uint32_t T, width, pos0, capacity; };
struct AttnPush { uint32_t T, heads, kv_heads, hd, pos0, window, capacity, S; };
struct SoftmaxPush { uint32_t rows, n; };
struct GeluPush { uint32_t rows, n, b_stride, b_offset; };
struct AddPush { uint32_t count, has_y; float scale; };
struct CapPush { uint32_t count; float cap; };
struct RoutePush { uint32_t T, E, K; };
struct MatvecPush { uint32_t slots, N, K, x_div, row0, expert_rows; };
struct CombinePush { uint32_t T, H, K; };

}  // namespace g4::gpu::decoder

namespace g4::gpu {

struct GpuDecoder::State {
  using Buf = decoder::Buf;
  using Place = decoder::Place;
  enum class Words : uint8_t { F32, F16, BF16 };
  // A weight on the device: matrices keep their stored words, vectors are widened to f32 at upload.
  struct Weight {
    Buf buf;
    Words words = Words::F32;
    uint32_t rows = 0, cols = 0;  // [rows, cols]: matrices are [out, in]
  };
  const VulkanSession& session;
  GpuDecoderSpec spec;
  GpuDecoderLimits limits;
  MatmulTile tile;
  uint32_t reduce_wg = 0;
  std::map<const TensorView*, Weight> weights;
  uint64_t weight_bytes = 0;
  // Pipelines.
  std::unique_ptr<ComputePipeline> matmul[3], embed[2], rms, rope, kv_write, scores, values, softmax, gelu, add, cap;
  std::unique_ptr<ComputePipeline> route, matvec[2], combine;  // MoE (matvec: f32, bf16 words)
  // Activations, max_step rows each.
  Buf x, h, q, k, v, a, o, g, u, att, logits, ids, cos_s, sin_s, cos_f, sin_f, ple, pe, pg;
  Buf ids_up, cos_s_up, sin_s_up, cos_f_up, sin_f_up, logits_down;
  // MoE: router probabilities [T, E], each slot's expert and weight [T, k], the experts' input
  // and output [T, H], gate/up [T·k, I_e] and the slots' outputs [T·k, H].
  Buf probs, slot_ids, slot_w, mx, me, mg, mu, my;
  std::vector<Buf> router_scale;  // per MoE layer: router.scale · H^-1/2 [H]; null elsewhere
  // Per owning layer: K and V buffers [capacity, kvh * hd]; null on KV-shared layers.
  std::vector<Buf> kc, vc;
  std::vector<uint32_t> capacity;
  int64_t position = 0;

  State(const VulkanSession& s, GpuDecoderSpec sp, GpuDecoderLimits l) : session(s), spec(std::move(sp)), limits(l) {}

  Buf buffer(uint64_t bytes, Place place = Place::Device) {
    return std::make_unique<DeviceBuffer>(session, std::max<uint64_t>(bytes, 4), place);
  }
  void upload(const DeviceBuffer& to, const void* data, uint64_t bytes);
  void add_weight(const TensorView* t, bool matrix);
  const Weight& w(const TensorView* t) const { return weights.at(t); }
  void build_pipelines();
  void allocate(uint32_t max_hd, uint32_t max_kv, uint32_t max_i, uint32_t max_keys);
  void allocate_moe();
  void check_step(const std::vector<int>& tokens) const;  // throws before anything is recorded
  void stage_inputs(const std::vector<int>& tokens);
};


}  // namespace g4::gpu
