#include "model/gguf_writer.h"

#include <algorithm>
#include <cstring>

#include "platform/atomic_file.h"
#include "platform/error.h"

namespace g4 {

namespace {

constexpr uint64_t kAlign = 32;

template <typename T>
void raw(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}
void str(std::string& s, const std::string& v) {
  raw<uint64_t>(s, v.size());
  s += v;
}
template <typename T>
std::string array(GgufType et, const std::vector<T>& v) {
  std::string s;
  raw<uint32_t>(s, uint32_t(GgufType::ARRAY));
  raw<uint32_t>(s, uint32_t(et));
  raw<uint64_t>(s, v.size());
  for (const T& x : v) raw<T>(s, x);
  return s;
}

void value_bytes(std::string& s, const GgufValue& v, bool with_type) {
  if (with_type) raw<uint32_t>(s, uint32_t(v.type));
  switch (v.type) {
    case GgufType::STRING: str(s, std::string(v.str)); return;
    case GgufType::ARRAY: {
      raw<uint32_t>(s, uint32_t(v.elem_type));
      raw<uint64_t>(s, v.count);
      if (v.elem_type == GgufType::STRING)
        for (auto sv : v.strings) str(s, std::string(sv));
      else if (v.elem_type == GgufType::ARRAY)
        for (const auto& a : v.arrays) value_bytes(s, a, false);
      else
        s.append(reinterpret_cast<const char*>(v.elems), size_t(v.count * gguf_scalar_size(v.elem_type)));
      return;
    }
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: raw<uint8_t>(s, uint8_t(v.i)); return;
    case GgufType::U16: case GgufType::I16: raw<uint16_t>(s, uint16_t(v.i)); return;
    case GgufType::U32: case GgufType::I32: raw<uint32_t>(s, uint32_t(v.i)); return;
    case GgufType::F32: raw<float>(s, float(v.f)); return;
    case GgufType::U64: raw<uint64_t>(s, v.u); return;
    case GgufType::I64: raw<int64_t>(s, v.i); return;
    case GgufType::F64: raw<double>(s, v.f); return;
  }
}

}  // namespace

void GgufWriter::put(const std::string& key, std::string bytes) {
  for (auto& kv : kv_)
    if (kv.first == key) {
      kv.second = std::move(bytes);
      return;
    }
  kv_.emplace_back(key, std::move(bytes));
}

#define G4_SCALAR(fn, T, gt)                              \
  void GgufWriter::fn(const std::string& key, T v) {      \
    std::string s;                                        \
    raw<uint32_t>(s, uint32_t(gt));                       \
    raw<T>(s, v);                                         \
    put(key, std::move(s));                               \
  }
G4_SCALAR(set_u32, uint32_t, GgufType::U32)
G4_SCALAR(set_i32, int32_t, GgufType::I32)
G4_SCALAR(set_u64, uint64_t, GgufType::U64)
G4_SCALAR(set_f32, float, GgufType::F32)
#undef G4_SCALAR

void GgufWriter::set_bool(const std::string& key, bool v) {
  std::string s;
  raw<uint32_t>(s, uint32_t(GgufType::BOOL));
  raw<uint8_t>(s, v ? 1 : 0);
  put(key, std::move(s));
}
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  std::string s;
  raw<uint32_t>(s, uint32_t(GgufType::STRING));
  str(s, v);
  put(key, std::move(s));
}
void GgufWriter::set_array_i32(const std::string& key, const std::vector<int32_t>& v) { put(key, array(GgufType::I32, v)); }
void GgufWriter::set_array_u32(const std::string& key, const std::vector<uint32_t>& v) { put(key, array(GgufType::U32, v)); }
void GgufWriter::set_array_f32(const std::string& key, const std::vector<float>& v) { put(key, array(GgufType::F32, v)); }
void GgufWriter::set_array_bool(const std::string& key, const std::vector<bool>& v) {
  std::vector<uint8_t> b(v.begin(), v.end());
  put(key, array(GgufType::BOOL, b));
}
void GgufWriter::set_array_string(const std::string& key, const std::vector<std::string>& v) {
  std::string s;
  raw<uint32_t>(s, uint32_t(GgufType::ARRAY));
  raw<uint32_t>(s, uint32_t(GgufType::STRING));
  raw<uint64_t>(s, v.size());
  for (const auto& x : v) str(s, x);
  put(key, std::move(s));
}
void GgufWriter::set_value(const std::string& key, const GgufValue& v) {
  std::string s;
  value_bytes(s, v, true);
  put(key, std::move(s));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
  if (shape.empty() || shape.size() > 4) throw Error("GGUF writer: tensor '" + name + "' needs 1 to 4 dimensions");
  const uint64_t rb = row_bytes(dtype, shape.back());
  if (!rb)
    throw Error("GGUF writer: tensor '" + name + "' row length " + std::to_string(shape.back()) + " is not a multiple of the " +
                std::string(dtype_name(dtype)) + " block size " + std::to_string(dtype_block_size(dtype)));
  uint64_t n = rb;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= uint64_t(shape[i]);
  tensors_.push_back({name, dtype, shape, n});
}

void GgufWriter::add_i64_tensor(const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.empty() || shape.size() > 4) throw Error("GGUF writer: tensor '" + name + "' needs 1 to 4 dimensions");
  uint64_t n = 8;
  for (int64_t d : shape) n *= uint64_t(d);
  tensors_.push_back({name, DType::F32, shape, n, true});
}

void GgufWriter::write(const std::filesystem::path& path, const Filler& fill) const {
  std::string h;
  raw<uint32_t>(h, 0x46554747u);
  raw<uint32_t>(h, 3);
  raw<uint64_t>(h, tensors_.size());
  raw<uint64_t>(h, kv_.size() + 1);
  str(h, "general.alignment");
  raw<uint32_t>(h, uint32_t(GgufType::U32));
  raw<uint32_t>(h, uint32_t(kAlign));
  for (const auto& [k, v] : kv_) {
    if (k == "general.alignment") throw Error("GGUF writer: general.alignment is fixed at 32");
    str(h, k);
    h += v;
  }
  uint64_t off = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors_) {
    str(h, t.name);
    raw<uint32_t>(h, uint32_t(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) raw<uint64_t>(h, uint64_t(*it));
    raw<uint32_t>(h, t.i64 ? 27u : dtype_to_ggml(t.dtype));
    raw<uint64_t>(h, off);
    offsets.push_back(off);
    off += (t.nbytes + kAlign - 1) / kAlign * kAlign;
  }
  while (h.size() % kAlign) h.push_back('\0');

  AtomicFile f(path);
  f.write(h);
  std::vector<std::byte> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    const uint64_t padded = (t.nbytes + kAlign - 1) / kAlign * kAlign;
    buf.assign(padded, std::byte{0});
    fill(i, buf.data());
    f.write(buf.data(), buf.size());
  }
  f.commit();
}

std::vector<float> gemma4_rope_freqs(const ModelConfig& c) {
  const int half = c.global_head_dim / 2;
  const int rotated = c.rope_full.type == RopeType::Proportional
                          ? int(c.rope_full.partial_rotary_factor * c.global_head_dim) / 2
                          : half;
  std::vector<float> f(size_t(half), 1e30f);
  for (int k = 0; k < rotated && k < half; ++k) f[size_t(k)] = 1.0f;
  return f;
}

void add_gemma4_metadata(GgufWriter& w, const ModelConfig& c, const std::string& name, const std::string& arch) {
  const std::string p = arch + ".";
  const int L = c.num_hidden_layers;
  w.set_string("general.architecture", arch);
  w.set_string("general.name", name);
  w.set_u32(p + "block_count", uint32_t(L));
  w.set_u32(p + "context_length", uint32_t(c.max_position_embeddings));
  w.set_u32(p + "embedding_length", uint32_t(c.hidden_size));
  bool uniform_ff = true;
  for (const auto& l : c.layers) uniform_ff = uniform_ff && l.mlp_width == c.layers[0].mlp_width;
  if (uniform_ff) {
    w.set_u32(p + "feed_forward_length", uint32_t(c.intermediate_size));
  } else {
    std::vector<int32_t> ff;
    for (const auto& l : c.layers) ff.push_back(l.mlp_width);
    w.set_array_i32(p + "feed_forward_length", ff);
  }
  w.set_u32(p + "attention.head_count", uint32_t(c.num_attention_heads));
  bool uniform_kv = true;
  for (const auto& l : c.layers) uniform_kv = uniform_kv && l.kv_heads == c.layers[0].kv_heads;
  if (uniform_kv) {
    w.set_u32(p + "attention.head_count_kv", uint32_t(c.layers[0].kv_heads));
  } else {
    std::vector<int32_t> kv;
    for (const auto& l : c.layers) kv.push_back(l.kv_heads);
    w.set_array_i32(p + "attention.head_count_kv", kv);
  }
  w.set_f32(p + "attention.layer_norm_rms_epsilon", float(c.rms_norm_eps));
  w.set_u32(p + "attention.key_length", uint32_t(c.global_head_dim));
  w.set_u32(p + "attention.value_length", uint32_t(c.global_head_dim));
  w.set_u32(p + "attention.key_length_swa", uint32_t(c.head_dim));
  w.set_u32(p + "attention.value_length_swa", uint32_t(c.head_dim));
  w.set_f32(p + "rope.freq_base", float(c.rope_full.theta));
  w.set_f32(p + "rope.freq_base_swa", float(c.rope_sliding.theta));
  w.set_u32(p + "rope.dimension_count", uint32_t(c.global_head_dim));
  w.set_u32(p + "rope.dimension_count_swa", uint32_t(c.head_dim));
  w.set_u32(p + "attention.sliding_window", uint32_t(c.sliding_window));
  std::vector<bool> pattern;
  for (LayerType t : c.layer_types) pattern.push_back(t == LayerType::Sliding);
  w.set_array_bool(p + "attention.sliding_window_pattern", pattern);
  w.set_u32(p + "attention.shared_kv_layers", uint32_t(c.num_kv_shared_layers));
  w.set_u32(p + "embedding_length_per_layer_input", uint32_t(c.hidden_size_per_layer_input));
  if (c.final_logit_softcapping) w.set_f32(p + "final_logit_softcapping", float(*c.final_logit_softcapping));
  if (c.enable_moe_block) {
    w.set_u32(p + "expert_count", uint32_t(c.num_experts));
    w.set_u32(p + "expert_used_count", uint32_t(c.top_k_experts));
    w.set_u32(p + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  }
}

}  // namespace g4

#include "model/gguf_weights.h"
#include "model/model.h"
#include "ops/quant/quant_dot.h"

namespace g4 {

namespace {

// Q4_K_M: the type of each GGUF name that will be written (the tied head is not).
std::map<std::string, DType> q4_k_m_plan(const Model& m, const std::map<std::string, TensorView>& src) {
  std::vector<std::string> names;
  const bool tied = m.weights.lm_head == m.weights.embed_tokens;
  for (const auto& [hf, view] : src)
    if (auto gg = hf_to_gguf_name(hf); gg && !(tied && *gg == "output.weight")) names.push_back(*gg);
  return q4_k_m_types(names);
}

}  // namespace

GgufExportReport write_model_gguf(const Model& m, DType type, const std::filesystem::path& out,
                                  const std::function<void(GgufWriter&)>& extra, QuantMix mix) {
  if (mix == QuantMix::Q4_K_M && type != DType::Q4_K)
    throw Error("write_model_gguf: the Q4_K_M mix is built on Q4_K, not " + std::string(dtype_name(type)));
  GgufExportReport rep;
  GgufWriter w;
  add_gemma4_metadata(w, m.config, out.stem().string());
  w.set_u32("general.quantization_version", 2);
  if (extra) extra(w);

  const std::map<std::string, TensorView>& src = m.gguf ? m.gguf_views : m.archive.tensors();
  std::vector<const TensorView*> sources;  // nullptr: rope_freqs (generated)
  const std::vector<float> rope = gemma4_rope_freqs(m.config);
  w.add_tensor("rope_freqs.weight", DType::F32, {int64_t(rope.size())});
  sources.push_back(nullptr);
  int fallback_q8 = 0, fallback_f32 = 0;
  const std::map<std::string, DType> mixed = mix == QuantMix::Q4_K_M ? q4_k_m_plan(m, src) : std::map<std::string, DType>{};
  for (const auto& [hf, view] : src) {
    auto gg = hf_to_gguf_name(hf);
    if (!gg) {
      rep.notes.push_back("not written (not part of the text decoder): " + hf);
      continue;
    }
    if (*gg == "output.weight" && m.weights.lm_head == m.weights.embed_tokens) {
      rep.notes.push_back("not written: " + hf + " (tied to the embeddings)");
      continue;
    }
    if (view.shape.empty()) {
      rep.notes.push_back("not written (a 0-d tensor): " + hf);
      continue;
    }
    const DType t = gguf_stored_dtype(view, mix == QuantMix::Q4_K_M ? mixed.at(*gg) : type, type, fallback_q8, fallback_f32);
    w.add_tensor(*gg, t, view.shape);
    sources.push_back(&view);
    rep.tensors_by_dtype[std::string(dtype_name(t))] += 1;
  }
  rep.tensors_by_dtype["F32"] += 1;  // rope_freqs
  finish_export_report(rep, w, type, fallback_q8, fallback_f32);

  std::vector<float> row;
  w.write(out, [&](size_t i, std::byte* dst) {
    if (const TensorView* s = sources[i]) encode_tensor_rows(*s, w.tensors()[i].dtype, dst, row);
    else std::memcpy(dst, rope.data(), rope.size() * 4);
  });
  return rep;
}

DType gguf_stored_dtype(const TensorView& view, DType want, DType type, int& fallback_q8, int& fallback_f32) {
  if (view.shape.size() < 2) return DType::F32;
  const int64_t cols = view.shape.back();
  if (row_bytes(want, cols)) return want;
  if (dtype_is_quantized(type) && row_bytes(DType::Q8_0, cols)) {
    ++fallback_q8;
    return DType::Q8_0;
  }
  ++fallback_f32;
  return DType::F32;
}

void encode_tensor_rows(const TensorView& s, DType dtype, std::byte* dst, std::vector<float>& row) {
  const int64_t cols = s.shape.back();
  const int64_t rows = s.numel() / cols;
  const uint64_t rb = row_bytes(dtype, cols);
  row.resize(size_t(cols));
  for (int64_t r = 0; r < rows; ++r) {
    s.row_to_f32(r, row.data());
    ops::quantize_row(dtype, row.data(), dst + uint64_t(r) * rb, cols);
  }
}

void finish_export_report(GgufExportReport& rep, const GgufWriter& w, DType type, int fallback_q8, int fallback_f32) {
  if (fallback_q8) rep.notes.push_back(std::to_string(fallback_q8) + " matrices have rows that are not whole " +
                                       std::string(dtype_name(type)) + " blocks: stored as Q8_0");
  if (fallback_f32) rep.notes.push_back(std::to_string(fallback_f32) + " matrices have rows that are not whole blocks: stored as F32");
  for (const auto& t : w.tensors()) rep.bytes += t.nbytes;
}

std::map<std::string, DType> q4_k_m_types(const std::vector<std::string>& gguf_names) {
  // Layer numbers of each kind that takes more bits, in order ("blk.N.attn_v.weight").
  auto layer_of = [](const std::string& name, const std::string& kind) -> int {
    const std::string tail = "." + kind + ".weight";
    if (name.rfind("blk.", 0) != 0 || name.size() <= tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail))
      return -1;
    return std::stoi(name.substr(4));
  };
  std::map<std::string, DType> types;
  const bool has_output = std::find(gguf_names.begin(), gguf_names.end(), "output.weight") != gguf_names.end();
  for (const std::string& n : gguf_names) types[n] = DType::Q4_K;
  if (auto head = types.find(has_output ? "output.weight" : "token_embd.weight"); head != types.end())
    head->second = DType::Q6_K;
  for (const std::string kind : {"attn_v", "ffn_down"}) {
    std::vector<std::pair<int, std::string>> layers;
    for (const std::string& n : gguf_names)
      if (int l = layer_of(n, kind); l >= 0) layers.push_back({l, n});
    std::sort(layers.begin(), layers.end());
    const int count = int(layers.size());
    for (int i = 0; i < count; ++i)  // llama.cpp's use_more_bits(i, count)
      if (i < count / 8 || i >= 7 * count / 8 || (i - count / 8) % 3 == 2) types[layers[size_t(i)].second] = DType::Q6_K;
  }
  return types;
}

}  // namespace g4
