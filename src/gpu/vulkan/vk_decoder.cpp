#include "gpu/vulkan/vk_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "gpu/vulkan/spirv_code.h"
#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_decoder_state.h"
#include "platform/device.h"
#include "platform/dtype.h"
#include "platform/error.h"

namespace g4::gpu {

using namespace decoder;

namespace {

using Format = GpuDecoder::State::Format;

Format format_of(const TensorView& t, bool vector) {
  if (vector) {
    if (t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16) return Format::F32;  // widened
    throw Error("dtype " + std::string(dtype_name(t.dtype)) + " for a vector (the decoder reads f32, f16 and bf16 ones)");
  }
  switch (t.dtype) {
    case DType::F32: return Format::F32;
    case DType::F16: return Format::F16;
    case DType::BF16: return Format::BF16;
    case DType::Q8_0: return Format::Q8_0;
    case DType::Q4_0: return Format::Q4_0;
    case DType::Q4_1: return Format::Q4_1;
    case DType::Q4_K: return Format::Q4_K;
    case DType::Q5_K: return Format::Q5_K;
    case DType::Q6_K: return Format::Q6_K;
    default: break;
  }
  throw Error("dtype " + std::string(dtype_name(t.dtype)) +
              " has no GPU shader (the decoder reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K matrices)");
}

// The variants of the shaders that read weights, indexed by Format; the products also with f16
// arithmetic (COMPUTE_F16, for GpuDecoderLimits::compute_f16).
using CodeFn = SpirvCode (*)();
#define G4_BY_FORMAT(s)                                                               \
  {spirv::s##_f32,  spirv::s##_f16,  spirv::s##_bf16, spirv::s##_q8_0, spirv::s##_q4_0, \
   spirv::s##_q4_1, spirv::s##_q4_k, spirv::s##_q5_k, spirv::s##_q6_k}
constexpr CodeFn kMatmulCode[] = G4_BY_FORMAT(matmul), kMatmulF16Code[] = G4_BY_FORMAT(matmul_c16);
constexpr CodeFn kGemvCode[] = G4_BY_FORMAT(gemv), kGemvF16Code[] = G4_BY_FORMAT(gemv_c16);
constexpr CodeFn kEmbedCode[] = G4_BY_FORMAT(embed);
constexpr CodeFn kMatvecCode[] = G4_BY_FORMAT(moe_matvec), kMatvecF16Code[] = G4_BY_FORMAT(moe_matvec_c16);
#undef G4_BY_FORMAT
static_assert(std::size(kMatmulCode) == GpuDecoder::State::kFormats, "one variant per Format");

// "128 MiB (134217728 bytes)", or "256 bytes".
std::string bytes_text(uint64_t b) {
  const std::string exact = std::to_string(b) + " bytes", short_form = format_bytes(b);
  return short_form == exact ? exact : short_form + " (" + exact + ")";
}

}  // namespace

void GpuDecoder::State::upload(const DeviceBuffer& to, const void* data, uint64_t bytes) {
  DeviceBuffer up(session, to.bytes(), Place::HostStaging);
  std::memset(up.mapped(), 0, to.bytes());
  std::memcpy(up.mapped(), data, bytes);
  CommandRecording rec(session);
  const VkBufferCopy region{0, 0, to.bytes()};
  session.impl().api->vkCmdCopyBuffer(rec.cmd(), up.handle(), to.handle(), 1, &region);
  rec.submit_and_wait();
}

void GpuDecoder::State::add_weight(const TensorView* t, Use use) {
  if (!t) return;  // absent
  auto [it, added] = weights.try_emplace(t);
  it->second.uses |= use;  // a tied head is the embedding: one weight, gathered and multiplied
  if (added) weight_order.push_back(t);
}

uint64_t GpuDecoder::State::buffer_limit() const {
  const VulkanDeviceInfo& d = session.info();
  uint64_t limit = d.max_storage_buffer_range;
  if (d.max_allocation_bytes) limit = std::min(limit, d.max_allocation_bytes);
  if (limits.max_buffer_bytes) limit = std::min(limit, limits.max_buffer_bytes);
  return limit / 4 * 4;  // parts are read as uints: whole words
}

void GpuDecoder::State::upload_weights() {
  const uint64_t limit = buffer_limit();
  const uint64_t range = session.info().max_storage_buffer_range;
  const std::string limit_text =
      bytes_text(limit) + " that one buffer may hold (" +
      (limit == range ? std::string("maxStorageBufferRange")
                      : std::string(limits.max_buffer_bytes ? "GpuDecoderLimits::max_buffer_bytes"
                                                            : "maxMemoryAllocationSize") +
                            "; maxStorageBufferRange " + bytes_text(range)) +
      ")";
  // Plan: each weight's format, row bytes and parts, and the device bytes of them all.
  struct Plan {
    uint64_t row_bytes = 0, rows_per_part = 0;
  };
  std::map<const TensorView*, Plan> plans;
  uint64_t total = 0;
  for (const TensorView* t : weight_order) {
    Weight& wt = weights.at(t);
    Plan& p = plans[t];
    try {
      const bool vector = wt.uses == Use::Vector;
      if (!vector && (wt.uses & Use::Vector)) throw Error("read both as a vector and as a matrix");
      wt.format = format_of(*t, vector);
      if (wt.format == Format::F16 && !session.info().storage_16bit)
        throw Error("f16 words need storageBuffer16BitAccess, which " + session.info().name + " does not report");
      wt.rows = uint32_t(t->shape.empty() || vector ? 1 : t->shape[0]);
      wt.cols = uint32_t(t->numel() / std::max<int64_t>(1, wt.rows));
      const bool blocks = dtype_is_quantized(t->dtype);
      if (blocks && (t->shape.empty() || t->shape.back() % dtype_block_size(t->dtype) != 0))
        throw Error("rows are not whole " + std::string(dtype_name(t->dtype)) + " blocks");
      p.row_bytes = vector ? uint64_t(wt.cols) * 4 : row_bytes(t->dtype, wt.cols);
      if (p.row_bytes == 0 || wt.rows == 0) throw Error("an empty tensor");
      if (p.row_bytes > limit)
        throw Error(std::string(vector ? "the vector" : "one row") + " takes " + bytes_text(p.row_bytes) +
                    ", over the " + limit_text + ": a row is never split");
      p.rows_per_part = std::min<uint64_t>(limit / p.row_bytes, wt.rows);
    } catch (const Error& e) {
      throw Error("gpu decoder: weight " + t->name + " " + shape_str(t->shape) + ": " + e.what());
    }
    const uint64_t full = wt.rows / p.rows_per_part, rest = wt.rows % p.rows_per_part;
    total += full * ((p.rows_per_part * p.row_bytes + 3) / 4 * 4) + (rest * p.row_bytes + 3) / 4 * 4;
  }
  const uint64_t heap = session.info().device_local_bytes();
  if (heap > 0 && total > heap)  // a device reporting no device-local heap is left to vkAllocateMemory
    throw Error("gpu decoder: the weights need " + bytes_text(total) + " of device memory, and " +
                session.info().name + "'s largest device-local heap holds " + bytes_text(heap) +
                ": refused before uploading (splitting the layers between the GPU and the CPU is not built)");
  // Upload: whole rows per part, widening vectors to f32.
  for (const TensorView* t : weight_order) {
    Weight& wt = weights.at(t);
    const Plan& p = plans.at(t);
    try {
      for (uint32_t r0 = 0; r0 < wt.rows; r0 += uint32_t(p.rows_per_part)) {
        Part part;
        part.row0 = r0, part.rows = uint32_t(std::min<uint64_t>(p.rows_per_part, wt.rows - r0));
        const uint64_t bytes = uint64_t(part.rows) * p.row_bytes;
        part.buf = buffer((bytes + 3) / 4 * 4);
        if (wt.uses == Use::Vector && t->dtype != DType::F32) {
          std::vector<float> f(size_t(t->numel()));
          for (int64_t i = 0; i < t->numel(); ++i) f[size_t(i)] = t->at(i);  // exact widening of a vector
          upload(*part.buf, f.data(), bytes);
        } else {
          upload(*part.buf, t->data + r0 * p.row_bytes, bytes);
        }
        weight_bytes += part.buf->bytes();
        ++weight_buffers;
        wt.parts.push_back(std::move(part));
      }
    } catch (const Error& e) {
      throw Error("gpu decoder: weight " + t->name + " " + shape_str(t->shape) + ": " + e.what());
    }
    // A tied table is read twice a step (gather and head): count its extra dispatches for both.
    split_dispatches += 2 * uint32_t(wt.parts.size() - 1);
    build_weight_pipelines(wt);
  }
}

void GpuDecoder::State::build_weight_pipelines(const Weight& wt) {
  const size_t f = size_t(wt.format);
  const bool c16 = limits.compute_f16;  // the products' f16 variants; the gather stays f32
  const std::vector<uint32_t> mm_spec{tile.workgroup, tile.rows, tile.cols, tile.depth};
  if ((wt.uses & Use::Matmul) && !matmul[f]) {
    matmul[f] = std::make_unique<ComputePipeline>(session, (c16 ? kMatmulF16Code : kMatmulCode)[f](), 3,
                                                  sizeof(MatmulPush), mm_spec);
    gemv[f] = std::make_unique<ComputePipeline>(session, (c16 ? kGemvF16Code : kGemvCode)[f](), 3, sizeof(GemvPush),
                                                std::vector<uint32_t>{kWg});
  }
  if ((wt.uses & Use::Gather) && !embed[f])
    embed[f] = std::make_unique<ComputePipeline>(session, kEmbedCode[f](), 3, sizeof(EmbedPush), std::vector<uint32_t>{kWg});
  if ((wt.uses & Use::Experts) && !matvec[f])
    matvec[f] = std::make_unique<ComputePipeline>(session, (c16 ? kMatvecF16Code : kMatvecCode)[f](), 4,
                                                  sizeof(MatvecPush), std::vector<uint32_t>{kWg});
}

void GpuDecoder::State::build_pipelines() {
  const ShaderTilePlan mm = plan_matmul_tile(session.info());
  tile = mm.tile;
  reduce_wg = plan_reduction(session.info()).workgroup;
  auto make = [&](SpirvCode code, uint32_t buffers, uint32_t push, uint32_t wg) {
    return std::make_unique<ComputePipeline>(session, code, buffers, push, std::vector<uint32_t>{wg});
  };
  rms = make(spirv::rms_norm(), 3, sizeof(NormPush), reduce_wg);
  softmax = make(spirv::softmax(), 1, sizeof(SoftmaxPush), reduce_wg);
  rope = make(spirv::rope(), 3, sizeof(RopePush), kWg);
  if (limits.kv_f16 && !session.info().storage_16bit)
    throw Error("gpu decoder: an f16 KV cache needs storageBuffer16BitAccess, which " + session.info().name +
                " does not report");
  if (limits.compute_f16 && !(session.info().shader_float16 && session.info().storage_16bit))
    throw Error("gpu decoder: f16 compute needs shaderFloat16 and storageBuffer16BitAccess, which " +
                session.info().name + " does not report both of");
  const bool half = limits.kv_f16;
  kv_write = make(half ? spirv::kv_write_f16() : spirv::kv_write(), 5, sizeof(KvPush), kWg);
  scores = make(half ? spirv::attention_scores_f16() : spirv::attention_scores(), 4, sizeof(AttnPush), kWg);
  values = make(half ? spirv::attention_values_f16() : spirv::attention_values(), 4, sizeof(AttnPush), kWg);
  gelu = make(spirv::gelu_mul(), 2, sizeof(GeluPush), kWg);
  add = make(spirv::add_scale(), 2, sizeof(AddPush), kWg);
  cap = make(spirv::softcap(), 1, sizeof(CapPush), kWg);
  route = make(spirv::moe_route(), 4, sizeof(RoutePush), kWg);
  combine = make(spirv::moe_combine(), 3, sizeof(CombinePush), kWg);
}

void GpuDecoder::State::allocate(uint32_t max_hd, uint32_t max_kv, uint32_t max_i, uint32_t max_keys) {
  const uint64_t S = limits.max_step, H = uint64_t(spec.hidden), nH = uint64_t(spec.heads), f = 4;
  const uint64_t LP = uint64_t(spec.layers.size()) * uint64_t(spec.ple_width);
  x = buffer(S * H * f), h = buffer(S * H * f), o = buffer(S * H * f);
  q = buffer(S * nH * max_hd * f), a = buffer(S * nH * max_hd * f);
  k = buffer(S * max_kv * max_hd * f), v = buffer(S * max_kv * max_hd * f);
  g = buffer(S * max_i * f), u = buffer(S * max_i * f);
  att = buffer(S * nH * max_keys * f);
  logits = buffer(S * uint64_t(spec.vocab) * f);
  ids = buffer(S * 4), rows = buffer(S * 8);
  const uint64_t half_bytes = S * (max_hd / 2) * f;
  cos_s = buffer(half_bytes), sin_s = buffer(half_bytes), cos_f = buffer(half_bytes), sin_f = buffer(half_bytes);
  ple = buffer(S * LP * f), pe = buffer(S * LP * f), pg = buffer(S * uint64_t(spec.ple_width) * f);
  ids_up = buffer(S * 4, Place::HostStaging), rows_up = buffer(S * 8, Place::HostStaging);
  cos_s_up = buffer(half_bytes, Place::HostStaging), sin_s_up = buffer(half_bytes, Place::HostStaging);
  cos_f_up = buffer(half_bytes, Place::HostStaging), sin_f_up = buffer(half_bytes, Place::HostStaging);
  logits_down = buffer(S * uint64_t(spec.vocab) * f, Place::HostStaging);
  hidden_down = buffer(S * H * f, Place::HostStaging);
  const size_t L = spec.layers.size();
  kc.resize(L), vc.resize(L), capacity.assign(L, 0), kv_down_offset.assign(L, 0);
  uint64_t down = 0;
  for (size_t i = 0; i < L; ++i) {
    const GpuLayerSpec& l = spec.layers[i];
    if (l.kv_shared) continue;
    // A sliding ring holds window - 1 earlier keys plus the longest step: no slot a step writes
    // is one its own queries still read, and a rollback of up to max_step - 1 positions finds
    // the window's keys intact. Full layers keep every position.
    capacity[i] = l.full ? limits.max_context
                         : std::min<uint32_t>(limits.max_context, uint32_t(spec.sliding_window) - 1 + limits.max_step);
    const uint64_t bytes = (uint64_t(limits.slots) * capacity[i] * kv_row_bytes(i) + 3) / 4 * 4;  // whole words
    try {
      kc[i] = buffer(bytes), vc[i] = buffer(bytes);
    } catch (const Error& e) {
      throw Error("gpu decoder: the KV buffer of layer " + std::to_string(i) + " (" + std::to_string(limits.slots) +
                  " slots x " + std::to_string(capacity[i]) + " positions x " + std::to_string(kv_width(i)) +
                  (limits.kv_f16 ? " halves): " : " floats): ") + e.what() + "; fewer sequences or a shorter context fit");
    }
    kv_down_offset[i] = down;
    down += 2 * S * kv_row_bytes(i);
  }
  kv_down = buffer(down, Place::HostStaging);
}

uint32_t GpuDecoder::capacity(int layer) const {
  if (layer < 0 || size_t(layer) >= s_->capacity.size()) throw Error("gpu decoder: no layer " + std::to_string(layer));
  return s_->capacity[size_t(layer)];
}

void GpuDecoder::load_kv(uint32_t slot, int layer, int64_t begin, int64_t n, const float* k, const float* v) {
  State& s = *s_;
  const uint32_t cap = capacity(layer);
  if (cap == 0) throw Error("gpu decoder: layer " + std::to_string(layer) + " reads another layer's KV");
  if (slot >= s.limits.slots) throw Error("gpu decoder: slot " + std::to_string(slot) + " out of range");
  if (begin < 0 || n < 0 || uint64_t(begin + n) > s.limits.max_context)
    throw Error("gpu decoder: positions " + std::to_string(begin) + "+" + std::to_string(n) + " past max_context");
  if (n == 0) return;
  const int64_t first = std::max<int64_t>(begin, begin + n - cap);  // a ring keeps its last cap positions
  const uint64_t width = s.kv_width(size_t(layer)), row = s.kv_row_bytes(size_t(layer));
  const uint64_t count = uint64_t(begin + n - first);
  DeviceBuffer up(s.session, 2 * count * row, Place::HostStaging);
  const float* from[2] = {k + (first - begin) * int64_t(width), v + (first - begin) * int64_t(width)};
  for (int kv = 0; kv < 2; ++kv) {
    char* to = static_cast<char*>(up.mapped()) + uint64_t(kv) * count * row;
    if (!s.limits.kv_f16) {
      std::memcpy(to, from[kv], count * row);
      continue;
    }
    for (uint64_t e = 0; e < count * width; ++e) reinterpret_cast<uint16_t*>(to)[e] = f32_to_f16(from[kv][e]);
  }
  std::vector<VkBufferCopy> regions;  // one per run of consecutive slots (a ring wraps at most once)
  for (int64_t p = first; p < begin + n; ++p) {
    const uint64_t src = uint64_t(p - first) * row, dst = (uint64_t(slot) * cap + uint64_t(p) % cap) * row;
    if (!regions.empty() && regions.back().srcOffset + regions.back().size == src &&
        regions.back().dstOffset + regions.back().size == dst)
      regions.back().size += row;
    else
      regions.push_back(VkBufferCopy{src, dst, row});
  }
  CommandRecording rec(s.session);
  const VulkanApi& api = *s.session.impl().api;
  api.vkCmdCopyBuffer(rec.cmd(), up.handle(), s.kc[size_t(layer)]->handle(), uint32_t(regions.size()), regions.data());
  for (VkBufferCopy& r : regions) r.srcOffset += count * row;
  api.vkCmdCopyBuffer(rec.cmd(), up.handle(), s.vc[size_t(layer)]->handle(), uint32_t(regions.size()), regions.data());
  rec.submit_and_wait();
}

GpuDecoder::GpuDecoder(const VulkanSession& session, GpuDecoderSpec spec, GpuDecoderLimits limits)
    : s_(std::make_unique<State>(session, std::move(spec), limits)) {
  State& s = *s_;
  const GpuDecoderSpec& sp = s.spec;
  if (limits.max_context == 0 || limits.max_step == 0 || limits.slots == 0)
    throw Error("gpu decoder: max_context, max_step and slots must be > 0");
  if (sp.layers.empty() || sp.hidden <= 0 || sp.heads <= 0 || sp.vocab <= 0 || !sp.rope_angles)
    throw Error("gpu decoder: incomplete spec (no layers, dimensions or RoPE angles)");
  if (sp.sliding_window <= 0) throw Error("gpu decoder: sliding_window must be > 0");
  s.build_pipelines();
  uint32_t max_hd = 0, max_kv = 1, max_i = 0;
  bool any_full = false;
  for (size_t i = 0; i < sp.layers.size(); ++i) {
    const GpuLayerSpec& l = sp.layers[i];
    if (l.kv_source < 0 || size_t(l.kv_source) > i || sp.layers[size_t(l.kv_source)].kv_shared)
      throw Error("gpu decoder: layer " + std::to_string(i) + " reads the KV of layer " + std::to_string(l.kv_source) +
                  ", which is not an earlier layer with its own KV");
    if (l.kv_heads <= 0 || sp.heads % l.kv_heads != 0)
      throw Error("gpu decoder: layer " + std::to_string(i) + ": " + std::to_string(sp.heads) +
                  " query heads are not a multiple of " + std::to_string(l.kv_heads) + " KV heads");
    max_hd = std::max(max_hd, uint32_t(l.head_dim));
    max_kv = std::max(max_kv, uint32_t(l.kv_heads));
    max_i = std::max(max_i, uint32_t(l.gate_proj->shape[0]));
    any_full = any_full || l.full;
    for (const TensorView* t : {l.q_proj, l.k_proj, l.v_proj, l.o_proj, l.gate_proj, l.up_proj, l.down_proj,
                                l.ple_input_gate, l.ple_projection})
      s.add_weight(t, State::Matmul);
    for (const TensorView* t : {l.input_norm, l.post_attention_norm, l.pre_feedforward_norm, l.post_feedforward_norm,
                                l.q_norm, l.k_norm, l.ple_post_norm, l.router_per_expert_scale, l.pre_feedforward_norm_2,
                                l.post_feedforward_norm_1, l.post_feedforward_norm_2})
      s.add_weight(t, State::Vector);
    if (l.moe) {
      s.add_weight(l.router_proj, State::Matmul);
      s.add_weight(l.experts_gate_up, State::Experts), s.add_weight(l.experts_down, State::Experts);
    }
  }
  s.add_weight(sp.embed_tokens, State::Gather), s.add_weight(sp.lm_head, State::Matmul);
  s.add_weight(sp.embed_per_layer, State::Gather), s.add_weight(sp.per_layer_model_projection, State::Matmul);
  for (const TensorView* t : {sp.final_norm, sp.per_layer_projection_norm}) s.add_weight(t, State::Vector);
  s.upload_weights();
  const uint32_t max_keys = any_full ? limits.max_context
                                     : std::min<uint32_t>(limits.max_context, uint32_t(sp.sliding_window));
  s.allocate(max_hd, max_kv, max_i, max_keys);
  s.allocate_moe();
}

void GpuDecoder::State::allocate_moe() {
  uint64_t E = 0, K = 0, Ie = 0;
  router_scale.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const GpuLayerSpec& l = spec.layers[i];
    if (!l.moe) continue;
    E = std::max<uint64_t>(E, uint64_t(l.router_proj->shape[0]));
    K = std::max<uint64_t>(K, uint64_t(l.top_k));
    Ie = std::max<uint64_t>(Ie, uint64_t(l.experts_down->shape[2]));
    router_scale[i] = buffer(l.router_input_scale.size() * 4);
    upload(*router_scale[i], l.router_input_scale.data(), l.router_input_scale.size() * 4);
  }
  if (E == 0) return;
  const uint64_t S = limits.max_step, H = uint64_t(spec.hidden), f = 4;
  probs = buffer(S * E * f), slot_ids = buffer(S * K * 4), slot_w = buffer(S * K * f);
  mx = buffer(S * H * f), me = buffer(S * H * f);
  mg = buffer(S * K * Ie * f), mu = buffer(S * K * Ie * f), my = buffer(S * K * H * f);
}

GpuDecoder::~GpuDecoder() = default;
int64_t GpuDecoder::position() const { return s_->position; }
void GpuDecoder::reset() { s_->position = 0; }
uint64_t GpuDecoder::weight_bytes() const { return s_->weight_bytes; }
uint32_t GpuDecoder::weight_buffers() const { return s_->weight_buffers; }

}  // namespace g4::gpu
