#include "gpu/vulkan/vk_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu/vulkan/spirv_code.h"
#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_decoder_state.h"
#include "platform/error.h"

namespace g4::gpu {

using namespace decoder;

void GpuDecoder::State::upload(const DeviceBuffer& to, const void* data, uint64_t bytes) {
  DeviceBuffer up(session, to.bytes(), Place::HostStaging);
  std::memset(up.mapped(), 0, to.bytes());
  std::memcpy(up.mapped(), data, bytes);
  CommandRecording rec(session);
  const VkBufferCopy region{0, 0, to.bytes()};
  session.impl().api->vkCmdCopyBuffer(rec.cmd(), up.handle(), to.handle(), 1, &region);
  rec.submit_and_wait();
}

void GpuDecoder::State::add_weight(const TensorView* t, bool matrix) {
  if (!t || weights.count(t)) return;  // absent, or shared (a tied head is the embedding)
  Weight wt;
  wt.rows = uint32_t(t->shape.empty() ? 1 : t->shape[0]);
  wt.cols = uint32_t(t->numel() / std::max<int64_t>(1, wt.rows));
  try {
    if (matrix && (t->dtype == DType::BF16 || t->dtype == DType::F16)) {
      if (t->dtype == DType::F16 && !session.info().storage_16bit)
        throw Error("f16 words need storageBuffer16BitAccess, which " + session.info().name + " does not report");
      wt.words = t->dtype == DType::F16 ? Words::F16 : Words::BF16;
      const uint64_t bytes = (uint64_t(t->numel()) * 2 + 3) / 4 * 4;  // read as uints: whole words
      wt.buf = buffer(bytes);
      upload(*wt.buf, t->data, uint64_t(t->numel()) * 2);
    } else if (t->dtype == DType::F32) {
      wt.buf = buffer(uint64_t(t->numel()) * 4);  // refused here, before any read, when over the range
      upload(*wt.buf, t->data, uint64_t(t->numel()) * 4);
    } else if (!matrix && (t->dtype == DType::BF16 || t->dtype == DType::F16)) {
      wt.buf = buffer(uint64_t(t->numel()) * 4);
      std::vector<float> f(size_t(t->numel()));
      for (int64_t i = 0; i < t->numel(); ++i) f[size_t(i)] = t->at(i);  // exact widening of a vector
      upload(*wt.buf, f.data(), f.size() * 4);
    } else {
      throw Error("dtype " + std::string(dtype_name(t->dtype)) +
                  " has no GPU shader yet (the decoder reads f32, and f16/bf16 words)");
    }
  } catch (const Error& e) {
    throw Error("gpu decoder: weight " + t->name + " " + shape_str(t->shape) + ": " + e.what());
  }
  weight_bytes += wt.buf->bytes();
  weights.emplace(t, std::move(wt));
}

void GpuDecoder::State::build_pipelines() {
  const ShaderTilePlan mm = plan_matmul_tile(session.info());
  tile = mm.tile;
  reduce_wg = plan_reduction(session.info()).workgroup;
  const std::vector<uint32_t> mm_spec{tile.workgroup, tile.rows, tile.cols, tile.depth};
  auto make = [&](SpirvCode code, uint32_t buffers, uint32_t push, uint32_t wg) {
    return std::make_unique<ComputePipeline>(session, code, buffers, push, std::vector<uint32_t>{wg});
  };
  matmul[0] = std::make_unique<ComputePipeline>(session, spirv::matmul_f32(), 3, sizeof(MatmulPush), mm_spec);
  if (session.info().storage_16bit)
    matmul[1] = std::make_unique<ComputePipeline>(session, spirv::matmul_f16(), 3, sizeof(MatmulPush), mm_spec);
  matmul[2] = std::make_unique<ComputePipeline>(session, spirv::matmul_bf16(), 3, sizeof(MatmulPush), mm_spec);
  embed[0] = make(spirv::embed_f32(), 3, sizeof(EmbedPush), kWg);
  embed[1] = make(spirv::embed_bf16(), 3, sizeof(EmbedPush), kWg);
  rms = make(spirv::rms_norm(), 3, sizeof(NormPush), reduce_wg);
  softmax = make(spirv::softmax(), 1, sizeof(SoftmaxPush), reduce_wg);
  rope = make(spirv::rope(), 3, sizeof(RopePush), kWg);
  kv_write = make(spirv::kv_write(), 4, sizeof(KvPush), kWg);
  scores = make(spirv::attention_scores(), 3, sizeof(AttnPush), kWg);
  values = make(spirv::attention_values(), 3, sizeof(AttnPush), kWg);
  gelu = make(spirv::gelu_mul(), 2, sizeof(GeluPush), kWg);
  add = make(spirv::add_scale(), 2, sizeof(AddPush), kWg);
  cap = make(spirv::softcap(), 1, sizeof(CapPush), kWg);
  route = make(spirv::moe_route(), 4, sizeof(RoutePush), kWg);
  matvec[0] = make(spirv::moe_matvec_f32(), 4, sizeof(MatvecPush), kWg);
  matvec[1] = make(spirv::moe_matvec_bf16(), 4, sizeof(MatvecPush), kWg);
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
  ids = buffer(S * 4);
  const uint64_t half_bytes = S * (max_hd / 2) * f;
  cos_s = buffer(half_bytes), sin_s = buffer(half_bytes), cos_f = buffer(half_bytes), sin_f = buffer(half_bytes);
  ple = buffer(S * LP * f), pe = buffer(S * LP * f), pg = buffer(S * uint64_t(spec.ple_width) * f);
  ids_up = buffer(S * 4, Place::HostStaging);
  cos_s_up = buffer(half_bytes, Place::HostStaging), sin_s_up = buffer(half_bytes, Place::HostStaging);
  cos_f_up = buffer(half_bytes, Place::HostStaging), sin_f_up = buffer(half_bytes, Place::HostStaging);
  logits_down = buffer(S * uint64_t(spec.vocab) * f, Place::HostStaging);
  const size_t L = spec.layers.size();
  kc.resize(L), vc.resize(L), capacity.assign(L, 0);
  for (size_t i = 0; i < L; ++i) {
    const GpuLayerSpec& l = spec.layers[i];
    if (l.kv_shared) continue;
    // A sliding ring holds window - 1 earlier keys plus the longest step: no slot a step writes
    // is one its own queries still read. Full layers keep every position.
    capacity[i] = l.full ? limits.max_context
                         : std::min<uint32_t>(limits.max_context, uint32_t(spec.sliding_window) - 1 + limits.max_step);
    const uint64_t bytes = uint64_t(capacity[i]) * uint64_t(l.kv_heads) * uint64_t(l.head_dim) * f;
    kc[i] = buffer(bytes), vc[i] = buffer(bytes);
  }
}

GpuDecoder::GpuDecoder(const VulkanSession& session, GpuDecoderSpec spec, GpuDecoderLimits limits)
    : s_(std::make_unique<State>(session, std::move(spec), limits)) {
  State& s = *s_;
  const GpuDecoderSpec& sp = s.spec;
  if (limits.max_context == 0 || limits.max_step == 0) throw Error("gpu decoder: max_context and max_step must be > 0");
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
      s.add_weight(t, true);
    for (const TensorView* t : {l.input_norm, l.post_attention_norm, l.pre_feedforward_norm, l.post_feedforward_norm,
                                l.q_norm, l.k_norm, l.ple_post_norm, l.router_per_expert_scale, l.pre_feedforward_norm_2,
                                l.post_feedforward_norm_1, l.post_feedforward_norm_2})
      s.add_weight(t, false);
    if (l.moe) {
      for (const TensorView* t : {l.experts_gate_up, l.experts_down})
        if (t->dtype != DType::F32 && t->dtype != DType::BF16)
          throw Error("gpu decoder: weight " + t->name + ": the expert shaders read f32 and bf16 words, not " +
                      std::string(dtype_name(t->dtype)));
      s.add_weight(l.router_proj, true), s.add_weight(l.experts_gate_up, true), s.add_weight(l.experts_down, true);
    }
  }
  for (const TensorView* t : {sp.embed_tokens, sp.lm_head, sp.embed_per_layer, sp.per_layer_model_projection})
    s.add_weight(t, true);
  for (const TensorView* t : {sp.final_norm, sp.per_layer_projection_norm}) s.add_weight(t, false);
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

}  // namespace g4::gpu
