// GpuDecoder's state, shared by its two halves: vk_decoder.cpp (weights, pipelines, buffers)
// and vk_decoder_step.cpp (recording and submitting a step).
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "gpu/shader_tiles.h"
#include "gpu/vulkan/vk_buffer.h"
#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_decoder.h"
#include "gpu/vulkan/vk_pipeline.h"

namespace g4::gpu::decoder {

using Place = DeviceBuffer::Place;
using Buf = std::unique_ptr<DeviceBuffer>;
constexpr uint32_t kWg = 64;  // element-wise shaders: no shared memory, any size the device allows

inline uint32_t groups(uint64_t n, uint32_t wg) { return uint32_t((n + wg - 1) / wg); }

// Push-constant blocks, in each shader's order.
struct GemvPush { uint32_t T, N, K, ldy, n0, padded; };
constexpr uint32_t kGemvRows = 8;  // steps up to this many rows take gemv.comp (decode, verify steps)
struct MatmulPush { uint32_t T, N, K, ldy, n0; };  // a part's N rows are y's columns n0.. of ldy
struct EmbedPush { uint32_t T, width; float scale; uint32_t row0, rows; };  // the part's table rows
struct NormPush { uint32_t rows, n; float eps; uint32_t weighted; };
struct RopePush { uint32_t T, heads, hd; };
struct KvPush { uint32_t T, width, capacity; };
struct AttnPush { uint32_t T, heads, kv_heads, hd, window, capacity, S; };
struct SoftmaxPush { uint32_t rows, n; };
struct GeluPush { uint32_t rows, n, b_stride, b_offset; };
struct AddPush { uint32_t count, has_y; float scale; };
struct CapPush { uint32_t count; float cap; };
struct RoutePush { uint32_t T, E, K; };
struct MatvecPush { uint32_t slots, N, K, x_div, row0, expert_rows, e0, experts; };  // the part's experts
struct CombinePush { uint32_t T, H, K; };

}  // namespace g4::gpu::decoder

namespace g4::gpu {

struct GpuDecoder::State {
  using Buf = decoder::Buf;
  using Place = decoder::Place;
  // How a weight's values are stored on the device, one shader variant each (weights.glsl):
  // matrices keep their checkpoint's words or blocks, vectors are widened to f32 at upload.
  enum class Format : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K };
  static constexpr size_t kFormats = 9;
  // What a weight is read by: the norm shaders (one f32 buffer), or a shader with a variant per
  // format, one dispatch per part.
  enum Use : uint8_t { Vector = 1, Matmul = 2, Gather = 4, Experts = 8 };
  // A run of whole rows (of [rows, cols]; experts for [E, rows_e, K]) in its own buffer: a matrix
  // over the buffer limit (maxStorageBufferRange, or GpuDecoderLimits::max_buffer_bytes) is
  // split into parts, each dispatched on its own rows.
  struct Part {
    Buf buf;
    uint32_t row0 = 0, rows = 0;
  };
  struct Weight {
    std::vector<Part> parts;  // one for vectors; empty until upload_weights()
    Format format = Format::F32;
    uint8_t uses = 0;             // Use bits: which pipelines read it
    uint32_t rows = 0, cols = 0;  // [rows, cols]: matrices are [out, in], 3-D tensors [E, rest]
    const DeviceBuffer* buf() const { return parts.front().buf.get(); }  // vectors: the one part
  };
  const VulkanSession& session;
  GpuDecoderSpec spec;
  GpuDecoderLimits limits;
  MatmulTile tile;
  uint32_t reduce_wg = 0;
  std::map<const TensorView*, Weight> weights;
  std::vector<const TensorView*> weight_order;  // as added: the upload order
  uint64_t weight_bytes = 0;
  uint32_t weight_buffers = 0;
  uint32_t split_dispatches = 0;  // dispatches a step records beyond one per weight read (parts)
  // Pipelines; those that read weights per format, built for the formats the weights have.
  // matmul: tiled, for prefill; gemv: one invocation per output, for steps of at most kGemvRows
  // rows (the same bits: gemv.comp); matvec: the experts' products.
  std::unique_ptr<ComputePipeline> matmul[kFormats], gemv[kFormats], embed[kFormats], matvec[kFormats];
  std::unique_ptr<ComputePipeline> rms, rope, kv_write, scores, values, softmax, gelu, add, cap;
  std::unique_ptr<ComputePipeline> route, combine;  // MoE
  // Activations, max_step rows each.
  // rows: each row's slot and position [T, 2]; the *_up buffers stage the inputs, the *_down
  // ones bring back logits, hidden rows and (for a host mirror) each layer's new K/V.
  Buf x, h, q, k, v, a, o, g, u, att, logits, ids, rows, cos_s, sin_s, cos_f, sin_f, ple, pe, pg;
  Buf ids_up, rows_up, cos_s_up, sin_s_up, cos_f_up, sin_f_up, logits_down, hidden_down, kv_down;
  // MoE: router probabilities [T, E], each slot's expert and weight [T, k], the experts' input
  // and output [T, H], gate/up [T·k, I_e] and the slots' outputs [T·k, H].
  Buf probs, slot_ids, slot_w, mx, me, mg, mu, my;
  std::vector<Buf> router_scale;  // per MoE layer: router.scale · H^-1/2 [H]; null elsewhere
  // Per owning layer: K and V buffers [slots, capacity, kvh * hd]; null on KV-shared layers.
  std::vector<Buf> kc, vc;
  std::vector<uint32_t> capacity;
  std::vector<uint64_t> kv_down_offset;  // per owning layer: where its [T, width] K then V land in kv_down (bytes)
  int64_t position = 0;  // slot 0's next position, for step()

  State(const VulkanSession& s, GpuDecoderSpec sp, GpuDecoderLimits l) : session(s), spec(std::move(sp)), limits(l) {}

  Buf buffer(uint64_t bytes, Place place = Place::Device) {
    return std::make_unique<DeviceBuffer>(session, std::max<uint64_t>(bytes, 4), place);
  }
  void upload(const DeviceBuffer& to, const void* data, uint64_t bytes);
  // Notes that t (absent: null) is read by `use`; nothing is read or uploaded yet.
  void add_weight(const TensorView* t, Use use);
  // Plans every added weight's format and parts, refuses (naming the tensor, or the bytes needed
  // and available) before any upload, then uploads them and builds their pipelines.
  void upload_weights();
  const Weight& w(const TensorView* t) const { return weights.at(t); }
  void build_pipelines();  // those that read no weight
  void build_weight_pipelines(const Weight& wt);
  uint64_t buffer_limit() const;  // bytes one weight buffer may hold
  void allocate(uint32_t max_hd, uint32_t max_kv, uint32_t max_i, uint32_t max_keys);
  void allocate_moe();
  void check_rows(const std::vector<GpuRow>& rows) const;  // throws before anything is recorded
  void stage_inputs(const std::vector<GpuRow>& rows);
  void record_kv_download(CommandRecording& rec, const std::vector<GpuRow>& batch) const;
  uint32_t kv_width(size_t layer) const { return uint32_t(spec.layers[layer].kv_heads * spec.layers[layer].head_dim); }
  uint64_t kv_row_bytes(size_t layer) const { return uint64_t(kv_width(layer)) * (limits.kv_f16 ? 2 : 4); }
};


}  // namespace g4::gpu
