#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu/vulkan/vk_command.h"
#include "gpu/vulkan/vk_decoder.h"
#include "gpu/vulkan/vk_decoder_state.h"
#include "platform/dtype.h"
#include "platform/error.h"

namespace g4::gpu {

using namespace decoder;

namespace {

// Records one step's dispatches into its one command buffer. Each dispatch is followed by a
// barrier: the next one reads what it wrote.
class StepRecorder {
 public:
  using State = GpuDecoder::State;
  // T rows; max_keys: the most keys any row sees on a full and on a sliding layer.
  StepRecorder(State& s, CommandRecording& rec, uint32_t T, const uint32_t max_keys[2])
      : s_(s), sp_(s.spec), rec_(rec), arena_(s.session, 64 * uint32_t(sp_.layers.size()) + 16 + s.split_dispatches,
                                              5 * (64 * uint32_t(sp_.layers.size()) + 16 + s.split_dispatches)),
        T_(T), keys_{max_keys[0], max_keys[1]}, H_(uint32_t(sp_.hidden)), nH_(uint32_t(sp_.heads)),
        P_(uint32_t(sp_.ple_width)), L_(uint32_t(sp_.layers.size())) {}
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
    gelu(*s_.g, *s_.u, T_, I, I, 0);
    matmul(*s_.g, l.down_proj, *s_.o);
    if (l.moe) {  // the dense branch is post_feedforward_norm_1'd, the experts' added to it
      norm(*s_.o, wb(l.post_feedforward_norm_1), *s_.o, T_, H_);
      experts(i);
    }
    norm(*s_.o, l.post_feedforward_norm, *s_.o, T_, H_);
    // The layer scalar multiplies the whole stream after the layer's last add.
    add(*s_.x, s_.o.get(), T_ * H_, P_ > 0 ? 1.0f : l.layer_scalar);
    if (P_ == 0) return;
    // x += ple_post_norm(proj(gelu(gate x) ⊙ ple[:, i])); x *= layer_scalar
    matmul(*s_.x, l.ple_input_gate, *s_.pg);
    gelu(*s_.pg, *s_.ple, T_, P_, L_ * P_, i * P_);
    matmul(*s_.pg, l.ple_projection, *s_.o);
    norm(*s_.o, l.ple_post_norm, *s_.o, T_, H_);
    add(*s_.x, s_.o.get(), T_ * H_, l.layer_scalar);
  }

  // logits = softcap(final_norm(x) · headᵀ) for the rows that want them: those rows of the
  // normed x are gathered into h first (copy regions), so a prefill chunk's head costs its
  // wanted rows only                                                                  [n, V]
  void head(const std::vector<uint32_t>& wanted) {
    norm(*s_.x, sp_.final_norm, *s_.x, T_, H_);
    const uint32_t n = uint32_t(wanted.size());
    if (n == 0) return;
    std::vector<VkBufferCopy> regions;
    const uint64_t row = uint64_t(H_) * 4;
    for (uint32_t i = 0; i < n; ++i) {
      if (!regions.empty() && regions.back().srcOffset + regions.back().size == wanted[i] * row &&
          regions.back().dstOffset + regions.back().size == i * row)
        regions.back().size += row;
      else
        regions.push_back(VkBufferCopy{wanted[i] * row, i * row, row});
    }
    rec_.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    s_.session.impl().api->vkCmdCopyBuffer(rec_.cmd(), s_.x->handle(), s_.h->handle(), uint32_t(regions.size()),
                                          regions.data());
    rec_.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT);
    const uint32_t T = T_;
    T_ = n;  // the head's products run over the gathered rows
    matmul(*s_.h, sp_.lm_head, *s_.logits);
    T_ = T;
    if (!sp_.softcap) return;
    const CapPush cp{n * uint32_t(sp_.vocab), *sp_.softcap};
    run(*s_.cap, {s_.logits.get()}, &cp, groups(uint64_t(cp.count), kWg));
  }

 private:
  // o += post_feedforward_norm_2(Σ_j w_j · expert_j(pre_feedforward_norm_2(x))), the experts and
  // weights chosen per token by the router on RMSNorm(x) · router_input_scale.
  void experts(uint32_t i) {
    const GpuLayerSpec& l = sp_.layers[i];
    const uint32_t E = uint32_t(l.router_proj->shape[0]), K = uint32_t(l.top_k);
    const uint32_t Ie = uint32_t(l.experts_down->shape[2]), slots = T_ * K;
    norm(*s_.x, wb(l.pre_feedforward_norm_2), *s_.mx, T_, H_);
    norm(*s_.x, s_.router_scale[i].get(), *s_.me, T_, H_);
    matmul(*s_.me, l.router_proj, *s_.probs);  // [T, E]
    const SoftmaxPush sm{T_, E};
    run(*s_.softmax, {s_.probs.get()}, &sm, std::min<uint32_t>(T_, 65535));
    const RoutePush rp{T_, E, K};
    run(*s_.route, {s_.probs.get(), wb(l.router_per_expert_scale), s_.slot_ids.get(), s_.slot_w.get()}, &rp,
        groups(T_, kWg));
    // gate rows, then up rows of each expert's [2·I_e, H]; then down [H, I_e]. One dispatch per part
    // (a run of whole experts); a slot routed elsewhere is left to its part's dispatch.
    const State::Weight& gate_up = s_.w(l.experts_gate_up);
    for (const State::Part& part : gate_up.parts) {
      const MatvecPush gp{slots, Ie, H_, K, 0, 2 * Ie, part.row0, part.rows}, up{slots, Ie, H_, K, Ie, 2 * Ie,
                                                                                 part.row0, part.rows};
      const ComputePipeline& mv = *s_.matvec[size_t(gate_up.format)];
      run(mv, {s_.mx.get(), part.buf.get(), s_.slot_ids.get(), s_.mg.get()}, &gp, groups(uint64_t(slots) * Ie, kWg));
      run(mv, {s_.mx.get(), part.buf.get(), s_.slot_ids.get(), s_.mu.get()}, &up, groups(uint64_t(slots) * Ie, kWg));
    }
    gelu(*s_.mg, *s_.mu, slots, Ie, Ie, 0);
    const State::Weight& down = s_.w(l.experts_down);
    for (const State::Part& part : down.parts) {
      const MatvecPush dp{slots, H_, Ie, 1, 0, H_, part.row0, part.rows};
      run(*s_.matvec[size_t(down.format)], {s_.mg.get(), part.buf.get(), s_.slot_ids.get(), s_.my.get()}, &dp,
          groups(uint64_t(slots) * H_, kWg));
    }
    const CombinePush cp{T_, H_, K};
    run(*s_.combine, {s_.my.get(), s_.slot_w.get(), s_.me.get()}, &cp, groups(uint64_t(T_) * H_, kWg));
    norm(*s_.me, wb(l.post_feedforward_norm_2), *s_.me, T_, H_);
    add(*s_.o, s_.me.get(), T_ * H_, 1.0f);
  }
  const DeviceBuffer* wb(const TensorView* t) const { return s_.w(t).buf(); }  // a vector's one buffer

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
        norm(*s_.v, static_cast<const DeviceBuffer*>(nullptr), *s_.v, T_ * kvh, hd);
      } else {
        norm(*s_.k, static_cast<const DeviceBuffer*>(nullptr), *s_.v, T_ * kvh, hd);  // K=V: v_norm of the key projection before k_norm
      }
      norm(*s_.k, l.k_norm, *s_.k, T_ * kvh, hd);
      const RopePush rk{T_, kvh, hd};
      run(*s_.rope, {s_.k.get(), &cos, &sin}, &rk, groups(uint64_t(T_) * kvh * hd / 2, kWg));
      const KvPush kp{T_, kvh * hd, s_.capacity[i]};
      run(*s_.kv_write, {s_.k.get(), s_.v.get(), s_.kc[i].get(), s_.vc[i].get(), s_.rows.get()}, &kp,
          groups(uint64_t(T_) * kvh * hd, kWg));
    }
    const uint32_t src = uint32_t(l.kv_source), W = uint32_t(sp_.sliding_window);
    // Score rows are S wide, S the most keys any row sees; a row's entries past its own keys
    // are -inf and its softmax sums them as zeros, so its bits do not depend on its neighbours.
    const uint32_t S = keys_[l.full ? 1 : 0];
    const AttnPush ap{T_, nH_, kvh, hd, l.full ? 0u : W, s_.capacity[src], S};
    run(*s_.scores, {s_.q.get(), s_.kc[src].get(), s_.att.get(), s_.rows.get()}, &ap,
        groups(uint64_t(T_) * nH_ * S, kWg));
    const SoftmaxPush sm{T_ * nH_, S};
    run(*s_.softmax, {s_.att.get()}, &sm, std::min<uint32_t>(T_ * nH_, 65535));
    run(*s_.values, {s_.att.get(), s_.vc[src].get(), s_.a.get(), s_.rows.get()}, &ap,
        groups(uint64_t(T_) * nH_ * hd, kWg));
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
  // y[T, N] = in · Wᵀ, one dispatch per part of W: a part's rows are y's columns row0.. .
  // Steps of a few rows take gemv (no tile rows left empty), longer ones the tiled matmul; the
  // two give the same bits, so a token's result does not depend on its step's size.
  void matmul(const DeviceBuffer& in, const TensorView* wt, const DeviceBuffer& y) {
    const State::Weight& w = s_.w(wt);
    for (const State::Part& part : w.parts) {
      if (T_ <= kGemvRows) {
        const GemvPush push{T_, part.rows, w.cols, w.rows, part.row0, w.cols % s_.tile.depth != 0 ? 1u : 0u};
        run(*s_.gemv[size_t(w.format)], {&in, part.buf.get(), &y}, &push, groups(uint64_t(T_) * part.rows, kWg));
        continue;
      }
      const MatmulPush push{T_, part.rows, w.cols, w.rows, part.row0};
      dispatch(*s_.matmul[size_t(w.format)], {in.handle(), part.buf->handle(), y.handle()}, &push,
               groups(part.rows, s_.tile.cols), groups(T_, s_.tile.rows));
    }
  }
  void norm(const DeviceBuffer& in, const TensorView* wt, const DeviceBuffer& y, uint32_t rows, uint32_t n) {
    norm(in, wt ? wb(wt) : nullptr, y, rows, n);
  }
  void norm(const DeviceBuffer& in, const DeviceBuffer* weight, const DeviceBuffer& y, uint32_t rows, uint32_t n) {
    const NormPush push{rows, n, sp_.rms_eps, weight ? 1u : 0u};
    const DeviceBuffer* w = weight ? weight : &in;  // unweighted: the binding is never read
    run(*s_.rms, {&in, w, &y}, &push, std::min<uint32_t>(rows, 65535));  // the shader strides over rows
  }
  void add(const DeviceBuffer& xb, const DeviceBuffer* y, uint32_t count, float scale) {
    const AddPush push{count, y ? 1u : 0u, scale};
    run(*s_.add, {&xb, y ? y : &xb}, &push, groups(count, kWg));
  }
  // y[t] = table[ids[t]] · scale, one dispatch per part of the table (each writes its ids' rows).
  void embed(const TensorView* table, const DeviceBuffer& y, uint32_t width, float scale) {
    const State::Weight& w = s_.w(table);
    for (const State::Part& part : w.parts) {
      const EmbedPush push{T_, width, scale, part.row0, part.rows};
      run(*s_.embed[size_t(w.format)], {s_.ids.get(), part.buf.get(), &y}, &push, groups(uint64_t(T_) * width, kWg));
    }
  }
  void gelu(const DeviceBuffer& ab, const DeviceBuffer& bb, uint32_t rows, uint32_t n, uint32_t stride,
            uint32_t offset) {
    const GeluPush push{rows, n, stride, offset};
    run(*s_.gelu, {&ab, &bb}, &push, groups(uint64_t(rows) * n, kWg));
  }

  State& s_;
  const GpuDecoderSpec& sp_;
  CommandRecording& rec_;
  DescriptorArena arena_;
  uint32_t T_;
  const uint32_t keys_[2];  // sliding, full
  const uint32_t H_, nH_, P_, L_;
  uint32_t dispatches_ = 0;
};

}  // namespace

void GpuDecoder::State::check_rows(const std::vector<GpuRow>& batch) const {
  const uint64_t T = batch.size();
  if (T == 0) throw Error("gpu decoder: empty step");
  if (T > limits.max_step)
    throw Error("gpu decoder: a step of " + std::to_string(T) + " tokens exceeds max_step " +
                std::to_string(limits.max_step));
  const int id_limit = spec.ple_width > 0 ? std::min(spec.vocab, spec.ple_vocab) : spec.vocab;
  std::vector<bool> seen(limits.slots, false);
  for (size_t t = 0; t < T; ++t) {
    const GpuRow& r = batch[t];
    const std::string at = " at step row " + std::to_string(t);
    if (r.slot >= limits.slots)
      throw Error("gpu decoder: slot " + std::to_string(r.slot) + at + " is outside [0, " +
                  std::to_string(limits.slots) + ")");
    if (r.pos < 0 || uint64_t(r.pos) >= limits.max_context)
      throw Error("gpu decoder: position " + std::to_string(r.pos) + at + " exceeds max_context " +
                  std::to_string(limits.max_context));
    if (r.token < 0 || r.token >= id_limit)
      throw Error("gpu decoder: token " + std::to_string(r.token) + at + " is outside the vocabulary [0, " +
                  std::to_string(id_limit) + ")");
    const bool continues = t > 0 && batch[t - 1].slot == r.slot;
    if (continues && r.pos != batch[t - 1].pos + 1)
      throw Error("gpu decoder: slot " + std::to_string(r.slot) + at + " is at position " + std::to_string(r.pos) +
                  " after " + std::to_string(batch[t - 1].pos) + " (a slot's rows are consecutive positions)");
    if (!continues && seen[r.slot])
      throw Error("gpu decoder: slot " + std::to_string(r.slot) + at + " appears in two runs of one step");
    seen[r.slot] = true;
  }
}

// Step inputs into the staging buffers: ids, each row's {slot, position}, and each layer type's
// RoPE cos/sin per row ([T, hd/2], from the model's own formula).
void GpuDecoder::State::stage_inputs(const std::vector<GpuRow>& rws) {
  const size_t T = rws.size();
  for (size_t t = 0; t < T; ++t) {
    static_cast<uint32_t*>(ids_up->mapped())[t] = uint32_t(rws[t].token);
    static_cast<uint32_t*>(rows_up->mapped())[2 * t] = rws[t].slot;
    static_cast<uint32_t*>(rows_up->mapped())[2 * t + 1] = uint32_t(rws[t].pos);
  }
  bool has_type[2] = {false, false};
  size_t half[2] = {0, 0};
  for (const GpuLayerSpec& l : spec.layers) has_type[l.full] = true, half[l.full] = size_t(l.head_dim / 2);
  DeviceBuffer* const cos_up[2] = {cos_s_up.get(), cos_f_up.get()};
  DeviceBuffer* const sin_up[2] = {sin_s_up.get(), sin_f_up.get()};
  for (int full = 0; full < 2; ++full)
    for (size_t t = 0; has_type[full] && t < T; ++t)
      spec.rope_angles(full != 0, rws[t].pos, static_cast<float*>(cos_up[full]->mapped()) + t * half[full],
                       static_cast<float*>(sin_up[full]->mapped()) + t * half[full]);
}

// Each row's K/V from its slot into kv_down (the ring still holds every row the step wrote): one
// copy region per run of consecutive buffer rows.
void GpuDecoder::State::record_kv_download(CommandRecording& rec, const std::vector<GpuRow>& batch) const {
  const VulkanApi& api = *session.impl().api;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (!kc[i]) continue;
    const uint64_t row = kv_row_bytes(i), ring = capacity[i];
    std::vector<VkBufferCopy> regions;
    for (uint32_t t = 0; t < uint32_t(batch.size()); ++t) {
      const uint64_t src = (batch[t].slot * ring + uint64_t(batch[t].pos) % ring) * row;
      const uint64_t dst = kv_down_offset[i] + t * row;
      if (!regions.empty() && regions.back().srcOffset + regions.back().size == src &&
          regions.back().dstOffset + regions.back().size == dst)
        regions.back().size += row;
      else
        regions.push_back(VkBufferCopy{src, dst, row});
    }
    api.vkCmdCopyBuffer(rec.cmd(), kc[i]->handle(), kv_down->handle(), uint32_t(regions.size()), regions.data());
    for (VkBufferCopy& c : regions) c.dstOffset += uint64_t(limits.max_step) * row;  // V after K
    api.vkCmdCopyBuffer(rec.cmd(), vc[i]->handle(), kv_down->handle(), uint32_t(regions.size()), regions.data());
  }
}

GpuBatchResult GpuDecoder::run(const std::vector<GpuRow>& rows, GpuBatchOptions options) {
  State& s = *s_;
  s.check_rows(rows);
  s.stage_inputs(rows);
  const uint32_t T = uint32_t(rows.size()), V = uint32_t(s.spec.vocab), H = uint32_t(s.spec.hidden);
  uint32_t max_keys[2] = {0, 0};  // sliding, full
  std::vector<uint32_t> wanted;
  for (uint32_t t = 0; t < T; ++t) {
    const uint32_t pos = uint32_t(rows[t].pos);
    max_keys[1] = std::max(max_keys[1], pos + 1);
    max_keys[0] = std::max(max_keys[0], std::min(pos + 1, uint32_t(s.spec.sliding_window)));
    if (rows[t].want_logits) wanted.push_back(t);
  }
  const uint32_t n = uint32_t(wanted.size());
  CommandRecording rec(s.session);
  const VulkanApi& api = *s.session.impl().api;
  auto copy = [&](const DeviceBuffer& from, const DeviceBuffer& to, uint64_t bytes) {
    const VkBufferCopy region{0, 0, bytes};
    api.vkCmdCopyBuffer(rec.cmd(), from.handle(), to.handle(), 1, &region);
  };
  copy(*s.ids_up, *s.ids, T * 4), copy(*s.rows_up, *s.rows, T * 8);
  copy(*s.cos_s_up, *s.cos_s, s.cos_s->bytes()), copy(*s.sin_s_up, *s.sin_s, s.sin_s->bytes());
  copy(*s.cos_f_up, *s.cos_f, s.cos_f->bytes()), copy(*s.sin_f_up, *s.sin_f, s.sin_f->bytes());
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
              VK_ACCESS_SHADER_READ_BIT);
  rec.start_timer();
  StepRecorder r(s, rec, T, max_keys);
  r.embeddings();
  for (uint32_t i = 0; i < uint32_t(s.spec.layers.size()); ++i) r.layer(i);
  r.head(wanted);
  rec.stop_timer();
  rec.barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
              VK_ACCESS_TRANSFER_READ_BIT);
  if (n > 0) copy(*s.logits, *s.logits_down, uint64_t(n) * V * 4);
  if (n > 0 && options.hidden) copy(*s.h, *s.hidden_down, uint64_t(n) * H * 4);
  if (options.kv) s.record_kv_download(rec, rows);
  rec.barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
              VK_ACCESS_HOST_READ_BIT);
  rec.submit_and_wait();  // the step's one submission
  GpuBatchResult out;
  out.submissions = 1;
  out.dispatches = r.dispatches();
  if (n > 0) {  // a prefill chunk may want no logits (memcpy of an empty vector's null data is UB)
    out.logits.resize(size_t(n) * V);
    std::memcpy(out.logits.data(), s.logits_down->mapped(), out.logits.size() * 4);
    if (options.hidden) {
      out.hidden.resize(size_t(n) * H);
      std::memcpy(out.hidden.data(), s.hidden_down->mapped(), out.hidden.size() * 4);
    }
  }
  if (options.kv) {
    out.k.resize(s.spec.layers.size()), out.v.resize(s.spec.layers.size());
    for (size_t i = 0; i < s.spec.layers.size(); ++i) {
      if (!s.kc[i]) continue;
      const size_t w = s.kv_width(i), row = s.kv_row_bytes(i);
      const char* base = static_cast<const char*>(s.kv_down->mapped()) + s.kv_down_offset[i];
      out.k[i].resize(T * w), out.v[i].resize(T * w);
      const char* from[2] = {base, base + s.limits.max_step * row};
      std::vector<float>* to[2] = {&out.k[i], &out.v[i]};
      for (int kv = 0; kv < 2; ++kv) {
        if (!s.limits.kv_f16) {
          std::memcpy(to[kv]->data(), from[kv], T * row);
          continue;
        }
        const uint16_t* h = reinterpret_cast<const uint16_t*>(from[kv]);
        for (size_t e = 0; e < T * w; ++e) (*to[kv])[e] = f16_to_f32(h[e]);  // exact widening
      }
    }
  }
  out.device_seconds = rec.timed_seconds();
  return out;
}

GpuStepResult GpuDecoder::step(const std::vector<int>& tokens) {
  State& s = *s_;
  std::vector<GpuRow> rows(tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) rows[t] = GpuRow{0, s.position + int64_t(t), tokens[t], true};
  GpuBatchResult b = run(rows);
  s.position += int64_t(tokens.size());
  GpuStepResult out;
  out.logits = std::move(b.logits);
  out.device_seconds = b.device_seconds;
  out.dispatches = b.dispatches;
  out.submissions = b.submissions;
  return out;
}

}  // namespace g4::gpu
