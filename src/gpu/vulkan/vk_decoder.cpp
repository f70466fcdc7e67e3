#include "gpu/vulkan/vk_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "gpu/shader_tiles.h"
#include "gpu/vulkan/spirv_code.h"
#include "gpu/vulkan/vk_buffer.h"
#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_pipeline.h"
#include "platform/error.h"

namespace g4::gpu {

namespace {

using Place = DeviceBuffer::Place;
using Buf = std::unique_ptr<DeviceBuffer>;
constexpr uint32_t kWg = 64;  // element-wise shaders: no shared memory, any size the device allows

uint32_t groups(uint64_t n, uint32_t wg) { return uint32_t((n + wg - 1) / wg); }

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

}  // namespace

struct GpuDecoder::State {
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
  // Activations, max_step rows each.
  Buf x, h, q, k, v, a, o, g, u, att, logits, ids, cos_s, sin_s, cos_f, sin_f, ple, pe, pg;
  Buf ids_up, cos_s_up, sin_s_up, cos_f_up, sin_f_up, logits_down;
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
  void check_step(const std::vector<int>& tokens) const;  // throws before anything is recorded
  void stage_inputs(const std::vector<int>& tokens);
};

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
                                l.q_norm, l.k_norm, l.ple_post_norm})
      s.add_weight(t, false);
  }
  for (const TensorView* t : {sp.embed_tokens, sp.lm_head, sp.embed_per_layer, sp.per_layer_model_projection})
    s.add_weight(t, true);
  for (const TensorView* t : {sp.final_norm, sp.per_layer_projection_norm}) s.add_weight(t, false);
  const uint32_t max_keys = any_full ? limits.max_context
                                     : std::min<uint32_t>(limits.max_context, uint32_t(sp.sliding_window));
  s.allocate(max_hd, max_kv, max_i, max_keys);
}

GpuDecoder::~GpuDecoder() = default;
int64_t GpuDecoder::position() const { return s_->position; }
void GpuDecoder::reset() { s_->position = 0; }
uint64_t GpuDecoder::weight_bytes() const { return s_->weight_bytes; }

namespace {

// Records one step's dispatches into its one command buffer. Each dispatch is followed by a
// barrier: the next one reads what it wrote.
class StepRecorder {
 public:
  using State = GpuDecoder::State;
  StepRecorder(State& s, CommandRecording& rec, uint32_t T, uint32_t pos0)
      : s_(s), sp_(s.spec), rec_(rec), arena_(s.session, 40 * uint32_t(sp_.layers.size()) + 16,
                                              4 * (40 * uint32_t(sp_.layers.size()) + 16)),
        T_(T), pos0_(pos0), H_(uint32_t(sp_.hidden)), nH_(uint32_t(sp_.heads)), P_(uint32_t(sp_.ple_width)),
        L_(uint32_t(sp_.layers.size())) {}
  uint32_t dispatches() const { return dispatches_; }

  // x = embed_tokens[ids] · sqrt(H); with P > 0 the per-layer inputs
  // ple = ((proj(x) · H^-½ → RMSNorm per P slice) + table[ids] · √P) · 2^-½         [T, L, P]
  void embeddings() {
    embed(sp_.embed_tokens, *s_.x, H_, sp_.embed_scale);
    if (P_ == 0) return;
    matmul(*s_.x, sp_.per_layer_model_projection, *s_.ple);
    add(*s_.ple, nullptr, T_ * L_ * P_, sp_.ple_proj_scale);
    norm(*s_.ple, sp_.per_layer_projection_norm, *s_.ple, T_ * L_, P_);
    embed(sp_.embed_per_layer, *s_.pe, L_ * P_, sp_.ple_embed_scale);
    add(*s_.ple, s_.pe.get(), T_ * L_ * P_, float(1.0 / std::sqrt(2.0)));
  }

  void layer(uint32_t i) {
    const GpuLayerSpec& l = sp_.layers[i];
    attention(i);
    // x += post_attention_norm(o_proj a)
    matmul(*s_.a, l.o_proj, *s_.o);
    norm(*s_.o, l.post_attention_norm, *s_.o, T_, H_);
    add(*s_.x, s_.o.get(), T_ * H_, 1.0f);
    // x += post_feedforward_norm(down(gelu(gate h) ⊙ up h)), h = pre_feedforward_norm(x)
    const uint32_t I = uint32_t(l.gate_proj->shape[0]);
    norm(*s_.x, l.pre_feedforward_norm, *s_.h, T_, H_);
    matmul(*s_.h, l.gate_proj, *s_.g);
    matmul(*s_.h, l.up_proj, *s_.u);
    gelu(*s_.g, *s_.u, I, I, 0);
    matmul(*s_.g, l.down_proj, *s_.o);
    norm(*s_.o, l.post_feedforward_norm, *s_.o, T_, H_);
    // The layer scalar multiplies the whole stream after the layer's last add.
    add(*s_.x, s_.o.get(), T_ * H_, P_ > 0 ? 1.0f : l.layer_scalar);
    if (P_ == 0) return;
    // x += ple_post_norm(proj(gelu(gate x) ⊙ ple[:, i])); x *= layer_scalar
    matmul(*s_.x, l.ple_input_gate, *s_.pg);
    gelu(*s_.pg, *s_.ple, P_, L_ * P_, i * P_);
    matmul(*s_.pg, l.ple_projection, *s_.o);
    norm(*s_.o, l.ple_post_norm, *s_.o, T_, H_);
    add(*s_.x, s_.o.get(), T_ * H_, l.layer_scalar);
  }

  // logits = softcap(final_norm(x) · headᵀ)                                           [T, V]
  void head() {
    norm(*s_.x, sp_.final_norm, *s_.x, T_, H_);
    matmul(*s_.x, sp_.lm_head, *s_.logits);
    if (!sp_.softcap) return;
    const CapPush cp{T_ * uint32_t(sp_.vocab), *sp_.softcap};
    run(*s_.cap, {s_.logits.get()}, &cp, groups(uint64_t(cp.count), kWg));
  }

 private:
  // h = input_norm(x); q = rope(q_norm(q_proj h)); unless KV-shared k = rope(k_norm(k_proj h)),
  // v = v_norm(v_proj h, or the raw k), written to the layer's KV buffer at their positions; then
  // a = softmax(q · kᵀ over each row's keys) · v, keys by absolute position          [T, nH, hd]
  void attention(uint32_t i) {
    const GpuLayerSpec& l = sp_.layers[i];
    const uint32_t hd = uint32_t(l.head_dim), kvh = uint32_t(l.kv_heads);
    const DeviceBuffer& cos = l.full ? *s_.cos_f : *s_.cos_s;
    const DeviceBuffer& sin = l.full ? *s_.sin_f : *s_.sin_s;
    norm(*s_.x, l.input_norm, *s_.h, T_, H_);
    matmul(*s_.h, l.q_proj, *s_.q);
    norm(*s_.q, l.q_norm, *s_.q, T_ * nH_, hd);
    const RopePush rq{T_, nH_, hd};
    run(*s_.rope, {s_.q.get(), &cos, &sin}, &rq, groups(uint64_t(T_) * nH_ * hd / 2, kWg));
    if (!l.kv_shared) {
      matmul(*s_.h, l.k_proj, *s_.k);
      if (l.v_proj) {
        matmul(*s_.h, l.v_proj, *s_.v);
        norm(*s_.v, nullptr, *s_.v, T_ * kvh, hd);
      } else {
        norm(*s_.k, nullptr, *s_.v, T_ * kvh, hd);  // K=V: v_norm of the key projection before k_norm
      }
      norm(*s_.k, l.k_norm, *s_.k, T_ * kvh, hd);
      const RopePush rk{T_, kvh, hd};
      run(*s_.rope, {s_.k.get(), &cos, &sin}, &rk, groups(uint64_t(T_) * kvh * hd / 2, kWg));
      const KvPush kp{T_, kvh * hd, pos0_, s_.capacity[i]};
      run(*s_.kv_write, {s_.k.get(), s_.v.get(), s_.kc[i].get(), s_.vc[i].get()}, &kp,
          groups(uint64_t(T_) * kvh * hd, kWg));
    }
    const uint32_t src = uint32_t(l.kv_source), W = uint32_t(sp_.sliding_window);
    const uint32_t S = l.full ? pos0_ + T_ : std::min(W, pos0_ + T_);  // keys of the step's last row
    const AttnPush ap{T_, nH_, kvh, hd, pos0_, l.full ? 0u : W, s_.capacity[src], S};
    run(*s_.scores, {s_.q.get(), s_.kc[src].get(), s_.att.get()}, &ap, groups(uint64_t(T_) * nH_ * S, kWg));
    const SoftmaxPush sm{T_ * nH_, S};
    run(*s_.softmax, {s_.att.get()}, &sm, std::min<uint32_t>(T_ * nH_, 65535));
    run(*s_.values, {s_.att.get(), s_.vc[src].get(), s_.a.get()}, &ap, groups(uint64_t(T_) * nH_ * hd, kWg));
  }

  void dispatch(const ComputePipeline& p, const std::vector<VkBuffer>& handles, const void* push, uint32_t gx,
                uint32_t gy) {
    p.record_with(rec_.cmd(), arena_.make(p, handles), push, gx, gy, 1);
    rec_.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    ++dispatches_;
  }
  // A 1-D grid of group_count workgroups, folded into 2-D past 65535 (the shaders unfold it).
  void run(const ComputePipeline& p, const std::vector<const DeviceBuffer*>& bufs, const void* push,
           uint64_t group_count) {
    std::vector<VkBuffer> handles;
    for (const DeviceBuffer* b : bufs) handles.push_back(b->handle());
    const uint32_t gx = uint32_t(std::min<uint64_t>(group_count, 65535));
    dispatch(p, handles, push, gx, groups(group_count, gx));
  }
  void matmul(const DeviceBuffer& in, const TensorView* wt, const DeviceBuffer& y) {  // y[T, N] = in · Wᵀ
    const State::Weight& w = s_.w(wt);
    const MatmulPush push{T_, w.rows, w.cols};
    dispatch(*s_.matmul[size_t(w.words)], {in.handle(), w.buf->handle(), y.handle()}, &push,
             groups(w.rows, s_.tile.cols), groups(T_, s_.tile.rows));
  }
  void norm(const DeviceBuffer& in, const TensorView* wt, const DeviceBuffer& y, uint32_t rows, uint32_t n) {
    const NormPush push{rows, n, sp_.rms_eps, wt ? 1u : 0u};
    const DeviceBuffer& wb = wt ? *s_.w(wt).buf : in;  // unweighted: the binding is never read
    run(*s_.rms, {&in, &wb, &y}, &push, std::min<uint32_t>(rows, 65535));  // the shader strides over rows
  }
  void add(const DeviceBuffer& xb, const DeviceBuffer* y, uint32_t count, float scale) {
    const AddPush push{count, y ? 1u : 0u, scale};
    run(*s_.add, {&xb, y ? y : &xb}, &push, groups(count, kWg));
  }
  void embed(const TensorView* table, const DeviceBuffer& y, uint32_t width, float scale) {
    const State::Weight& w = s_.w(table);
    const EmbedPush push{T_, width, scale};
    run(*s_.embed[w.words == State::Words::BF16 ? 1 : 0], {s_.ids.get(), w.buf.get(), &y}, &push,
        groups(uint64_t(T_) * width, kWg));
  }
  void gelu(const DeviceBuffer& ab, const DeviceBuffer& bb, uint32_t n, uint32_t stride, uint32_t offset) {
    const GeluPush push{T_, n, stride, offset};
    run(*s_.gelu, {&ab, &bb}, &push, groups(uint64_t(T_) * n, kWg));
  }

  State& s_;
  const GpuDecoderSpec& sp_;
  CommandRecording& rec_;
  DescriptorArena arena_;
  const uint32_t T_, pos0_, H_, nH_, P_, L_;
  uint32_t dispatches_ = 0;
};

}  // namespace

void GpuDecoder::State::check_step(const std::vector<int>& tokens) const {
  const uint64_t T = tokens.size();
  if (T == 0) throw Error("gpu decoder: empty step");
  if (T > limits.max_step)
    throw Error("gpu decoder: a step of " + std::to_string(T) + " tokens exceeds max_step " +
                std::to_string(limits.max_step));
  if (uint64_t(position) + T > limits.max_context)
    throw Error("gpu decoder: positions " + std::to_string(position) + ".." + std::to_string(position + int64_t(T) - 1) +
                " exceed max_context " + std::to_string(limits.max_context));
  const int id_limit = spec.ple_width > 0 ? std::min(spec.vocab, spec.ple_vocab) : spec.vocab;
  for (size_t t = 0; t < T; ++t)
    if (tokens[t] < 0 || tokens[t] >= id_limit)
      throw Error("gpu decoder: token " + std::to_string(tokens[t]) + " at step row " + std::to_string(t) +
                  " is outside the vocabulary [0, " + std::to_string(id_limit) + ")");
}

// Step inputs into the staging buffers: ids, and each layer type's RoPE cos/sin per row
// ([T, hd/2], from the model's own formula).
void GpuDecoder::State::stage_inputs(const std::vector<int>& tokens) {
  const size_t T = tokens.size();
  for (size_t t = 0; t < T; ++t) static_cast<uint32_t*>(ids_up->mapped())[t] = uint32_t(tokens[t]);
  bool has_type[2] = {false, false};
  size_t half[2] = {0, 0};
  for (const GpuLayerSpec& l : spec.layers) has_type[l.full] = true, half[l.full] = size_t(l.head_dim / 2);
  DeviceBuffer* const cos_up[2] = {cos_s_up.get(), cos_f_up.get()};
  DeviceBuffer* const sin_up[2] = {sin_s_up.get(), sin_f_up.get()};
  for (int full = 0; full < 2; ++full)
    for (size_t t = 0; has_type[full] && t < T; ++t)
      spec.rope_angles(full != 0, position + int64_t(t), static_cast<float*>(cos_up[full]->mapped()) + t * half[full],
                       static_cast<float*>(sin_up[full]->mapped()) + t * half[full]);
}

GpuStepResult GpuDecoder::step(const std::vector<int>& tokens) {
  State& s = *s_;
  s.check_step(tokens);
  s.stage_inputs(tokens);
  const uint32_t T = uint32_t(tokens.size()), V = uint32_t(s.spec.vocab);
  CommandRecording rec(s.session);
  const VulkanApi& api = *s.session.impl().api;
  auto copy = [&](const DeviceBuffer& from, const DeviceBuffer& to, uint64_t bytes) {
    const VkBufferCopy region{0, 0, bytes};
    api.vkCmdCopyBuffer(rec.cmd(), from.handle(), to.handle(), 1, &region);
  };
  copy(*s.ids_up, *s.ids, T * 4);
  copy(*s.cos_s_up, *s.cos_s, s.cos_s->bytes()), copy(*s.sin_s_up, *s.sin_s, s.sin_s->bytes());
  copy(*s.cos_f_up, *s.cos_f, s.cos_f->bytes()), copy(*s.sin_f_up, *s.sin_f, s.sin_f->bytes());
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT);
  rec.start_timer();
  StepRecorder r(s, rec, T, uint32_t(s.position));
  r.embeddings();
  for (uint32_t i = 0; i < uint32_t(s.spec.layers.size()); ++i) r.layer(i);
  r.head();
  rec.stop_timer();
  rec.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
  copy(*s.logits, *s.logits_down, uint64_t(T) * V * 4);
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
  rec.submit_and_wait();  // the step's one submission
  GpuStepResult out;
  out.submissions = 1;
  out.dispatches = r.dispatches();
  out.logits.resize(size_t(T) * V);
  std::memcpy(out.logits.data(), s.logits_down->mapped(), out.logits.size() * 4);
  out.device_seconds = rec.timed_seconds();
  s.position += T;
  return out;
}

}  // namespace g4::gpu
