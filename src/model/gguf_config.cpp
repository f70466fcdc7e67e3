#include "model/gguf_config.h"

#include <cmath>

#include "ops/ref/reference_ops.h"
#include "platform/error.h"

namespace g4 {

namespace {

const char* const kAssistantArch = "gemma4-assistant";

struct Meta {
  const GgufFile& g;
  std::string file;
  std::string arch;  // "gemma4", or "gemma4-assistant" for a drafter: the metadata keys' prefix

  std::string k(const std::string& key) const { return arch + "." + key; }
  bool drafter() const { return arch == kAssistantArch; }

  std::string at(const std::string& key) const {
    const GgufValue* v = g.find(key);
    return v ? " (byte " + std::to_string(v->offset) + ")" : "";
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(file + ": metadata '" + key + "'" + at(key) + ": " + why);
  }
  int get_int(const std::string& key, std::optional<int> fallback, int min_value) const {
    auto v = g.get_int(key);
    if (!v) {
      if (!fallback) fail(key, "required key is missing");
      return *fallback;
    }
    if (*v < min_value || *v > (1ll << 31) - 1) fail(key, "= " + std::to_string(*v) + " is out of range (min " + std::to_string(min_value) + ")");
    return int(*v);
  }
  // A scalar, or an array with one entry per layer.
  std::vector<int> per_layer(const std::string& key, int L, int min_value) const {
    const GgufValue* v = g.find(key);
    if (!v) fail(key, "required key is missing");
    std::vector<int> out;
    if (v->type == GgufType::ARRAY) {
      if (!v->is_numeric_array() || v->elem_type == GgufType::F32 || v->elem_type == GgufType::F64 || v->elem_type == GgufType::BOOL)
        fail(key, "must be an integer or an array of integers");
      if (v->count != uint64_t(L)) fail(key, "has " + std::to_string(v->count) + " entries but block_count = " + std::to_string(L));
      for (uint64_t i = 0; i < v->count; ++i) {
        const int64_t x = v->int_at(i);
        if (x < min_value || x > (1ll << 31) - 1) fail(key, "entry " + std::to_string(i) + " = " + std::to_string(x) + " is out of range");
        out.push_back(int(x));
      }
    } else {
      out.assign(size_t(L), get_int(key, std::nullopt, min_value));
    }
    return out;
  }
};

// The steps of config_from_gguf, in the order it checks the file (the first problem found is the
// one reported).

// Architecture, sizes, norms and softcaps, sliding window, KV sharing.
void read_geometry(const Meta& m, ModelConfig& c) {
  const GgufFile& g = m.g;
  const auto arch = g.get_string("general.architecture");
  if (!arch) m.fail("general.architecture", "required key is missing");
  if (*arch != m.arch) {
    if (*arch == kAssistantArch) m.fail("general.architecture", "= \"gemma4-assistant\": a drafter, not a model (pass it as --draft-model)");
    if (*arch == "gemma4") m.fail("general.architecture", "= \"gemma4\": a Gemma 4 model, not a gemma4-assistant drafter");
    m.fail("general.architecture", "= \"" + *arch + "\": g4 reads the " + m.arch + " architecture only");
  }
  c.model_type = "gemma4_text";
  const int L = m.get_int(m.k("block_count"), std::nullopt, 1);
  if (L > 4096) m.fail(m.k("block_count"), "= " + std::to_string(L) + " is absurd");
  c.num_hidden_layers = L;
  c.hidden_size = m.get_int(m.k("embedding_length"), std::nullopt, 1);
  c.num_attention_heads = m.get_int(m.k("attention.head_count"), std::nullopt, 1);
  c.max_position_embeddings = m.get_int(m.k("context_length"), 131072, 1);
  c.global_head_dim = m.get_int(m.k("attention.key_length"), std::nullopt, 2);
  c.head_dim = m.get_int(m.k("attention.key_length_swa"), std::nullopt, 2);
  if (m.get_int(m.k("attention.value_length"), c.global_head_dim, 1) != c.global_head_dim)
    m.fail(m.k("attention.value_length"), "must equal attention.key_length = " + std::to_string(c.global_head_dim));
  if (m.get_int(m.k("attention.value_length_swa"), c.head_dim, 1) != c.head_dim)
    m.fail(m.k("attention.value_length_swa"), "must equal attention.key_length_swa = " + std::to_string(c.head_dim));
  if (auto e = g.get_float(m.k("attention.layer_norm_rms_epsilon"))) c.rms_norm_eps = *e;
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) m.fail(m.k("attention.layer_norm_rms_epsilon"), "must be in (0, 1)");
  if (auto s = g.get_float(m.k("final_logit_softcapping"))) {
    if (!(*s > 0)) m.fail(m.k("final_logit_softcapping"), "must be > 0");
    c.final_logit_softcapping = *s;
  }
  if (g.find(m.k("attn_logit_softcapping"))) m.fail(m.k("attn_logit_softcapping"), "Gemma 4 has no attention-logit softcap");
  c.sliding_window = m.get_int(m.k("attention.sliding_window"), std::nullopt, 1);
  c.num_kv_shared_layers = m.get_int(m.k("attention.shared_kv_layers"), 0, 0);
  c.hidden_size_per_layer_input = m.get_int(m.k("embedding_length_per_layer_input"), 0, 0);
  if (!m.drafter()) return;
  // A drafter's layers own no K/V (they read the target's): llama.cpp writes the config's
  // num_kv_shared_layers, 0 or every layer. The plans are marked shared by the caller.
  if (c.num_kv_shared_layers != 0 && c.num_kv_shared_layers != L)
    m.fail(m.k("attention.shared_kv_layers"), "= " + std::to_string(c.num_kv_shared_layers) +
                                                 ": a drafter shares all its layers' K/V (0 or block_count = " + std::to_string(L) + ")");
  c.num_kv_shared_layers = 0;
  if (c.hidden_size_per_layer_input) m.fail(m.k("embedding_length_per_layer_input"), "must be 0: a drafter has no per-layer embeddings");
}

// Layer types (bool per layer, true = sliding). Returns the first KV-shared layer.
int read_layer_types(const Meta& m, ModelConfig& c) {
  const int L = c.num_hidden_layers;
  if (const GgufValue* v = m.g.find(m.k("attention.sliding_window_pattern"))) {
    if (v->type != GgufType::ARRAY || v->elem_type != GgufType::BOOL || !v->elems)
      m.fail(m.k("attention.sliding_window_pattern"), "must be an array of bool");
    if (v->count != uint64_t(L))
      m.fail(m.k("attention.sliding_window_pattern"), "has " + std::to_string(v->count) + " entries but block_count = " + std::to_string(L));
    for (int i = 0; i < L; ++i) c.layer_types.push_back(v->int_at(uint64_t(i)) ? LayerType::Sliding : LayerType::Full);
  } else {
    for (int i = 0; i < L; ++i) c.layer_types.push_back((i + 1) % 6 ? LayerType::Sliding : LayerType::Full);
    c.notes.push_back("attention.sliding_window_pattern absent: using the reference default (every 6th layer full)");
  }
  if (c.layer_types.back() != LayerType::Full) {
    c.layer_types.back() = LayerType::Full;
    c.notes.push_back("last layer was sliding; forced to full attention as the reference does");
  }
  const int first_shared = L - c.num_kv_shared_layers;
  if (first_shared < 1) m.fail(m.k("attention.shared_kv_layers"), "must be below block_count = " + std::to_string(L));
  return first_shared;
}

// Vocabulary sizes and tied embeddings come from the tensors.
void read_vocab_from_tensors(const Meta& m, ModelConfig& c) {
  const auto& T = m.g.tensors();
  auto emb = T.find("token_embd.weight");
  if (emb == T.end()) throw Error(m.file + ": missing tensor 'token_embd.weight' (the vocabulary size comes from it)");
  if (emb->second.shape.size() != 2 || emb->second.shape[1] != c.hidden_size)
    throw Error(m.file + ": tensor 'token_embd.weight' (data at byte " + std::to_string(emb->second.file_offset) +
                ") has shape " + shape_str(emb->second.shape) + " (row-major), expected [vocab, " +
                std::to_string(c.hidden_size) + "]");
  if (emb->second.shape[0] > (1ll << 31) - 1) throw Error(m.file + ": tensor 'token_embd.weight' has an absurd vocabulary");
  c.vocab_size = int(emb->second.shape[0]);
  c.vocab_size_per_layer_input = m.drafter() ? 0 : c.vocab_size;
  if (auto ple = T.find("per_layer_token_embd.weight"); ple != T.end() && !ple->second.shape.empty())
    c.vocab_size_per_layer_input = int(std::min<int64_t>(ple->second.shape[0], (1ll << 31) - 1));
  c.tie_word_embeddings = !T.count("output.weight");
}

// K=V: full, non-shared layers without attn_v.
void read_k_eq_v(const Meta& m, ModelConfig& c, int first_shared) {
  if (m.drafter()) return;  // no K/V projections at all: read_kv_heads decides
  const auto& T = m.g.tensors();
  int with_v = 0, without_v = 0;
  for (int i = 0; i < first_shared; ++i)
    if (c.layer_types[size_t(i)] == LayerType::Full) (T.count("blk." + std::to_string(i) + ".attn_v.weight") ? with_v : without_v)++;
  if (with_v && without_v)
    throw Error(m.file + ": " + std::to_string(without_v) + " full-attention layers lack attn_v.weight but " +
                std::to_string(with_v) + " have it: attention_k_eq_v must hold for all full layers or none");
  c.attention_k_eq_v = without_v > 0;
}

// KV heads: scalar, or per layer (sliding layers nKV, full layers num_global_key_value_heads).
void read_kv_heads(const Meta& m, ModelConfig& c) {
  const int L = c.num_hidden_layers;
  const std::vector<int> kv = m.per_layer(m.k("attention.head_count_kv"), L, 1);
  std::optional<int> kv_sliding, kv_full;
  for (int i = 0; i < L; ++i) {
    auto& slot = c.layer_types[size_t(i)] == LayerType::Sliding ? kv_sliding : kv_full;
    if (slot && *slot != kv[size_t(i)])
      m.fail(m.k("attention.head_count_kv"), "layer " + std::to_string(i) + " has " + std::to_string(kv[size_t(i)]) +
                                                " heads but an earlier layer of the same type has " + std::to_string(*slot) +
                                                " (g4 supports one count per layer type)");
    slot = kv[size_t(i)];
  }
  c.num_key_value_heads = kv_sliding ? *kv_sliding : *kv_full;
  if (kv_full && *kv_full != c.num_key_value_heads) {
    if (m.drafter()) c.attention_k_eq_v = true;  // a drafter mirrors its target's K=V full layers
    if (!c.attention_k_eq_v)
      m.fail(m.k("attention.head_count_kv"), "full layers have " + std::to_string(*kv_full) + " KV heads and sliding layers " +
                                                std::to_string(c.num_key_value_heads) +
                                                ", which Gemma 4 allows only with K=V full layers (these have attn_v)");
    c.num_global_key_value_heads = *kv_full;
  }
}

// MLP width: scalar, or per layer with the double-wide pattern (I below first_shared, 2I after).
void read_mlp_widths(const Meta& m, ModelConfig& c, int first_shared) {
  const int L = c.num_hidden_layers;
  const std::vector<int> ff = m.per_layer(m.k("feed_forward_length"), L, 1);
  c.intermediate_size = ff[0];
  bool all_same = true;
  for (int x : ff) all_same = all_same && x == ff[0];
  if (all_same) return;
  for (int i = 0; i < L; ++i) {
    const int want = i < first_shared ? ff[0] : 2 * ff[0];
    if (ff[size_t(i)] != want)
      m.fail(m.k("feed_forward_length"), "layer " + std::to_string(i) + " = " + std::to_string(ff[size_t(i)]) + ", expected " +
                                            std::to_string(want) + " (g4 knows uniform widths and the double-wide pattern: I below the first KV-shared layer " +
                                            std::to_string(first_shared) + ", 2I from there)");
  }
  c.use_double_wide_mlp = true;
}

void read_moe(const Meta& m, ModelConfig& c) {
  c.num_experts = m.get_int(m.k("expert_count"), 0, 0);
  if (c.num_experts == 0) return;
  if (m.drafter()) m.fail(m.k("expert_count"), "a drafter has no MoE block");
  c.enable_moe_block = true;
  c.top_k_experts = m.get_int(m.k("expert_used_count"), std::nullopt, 1);
  c.moe_intermediate_size = m.get_int(m.k("expert_feed_forward_length"), std::nullopt, 1);
  if (c.top_k_experts > c.num_experts) m.fail(m.k("expert_used_count"), "exceeds expert_count = " + std::to_string(c.num_experts));
}

// How many leading pairs rope_freqs.weight rotates (1.0 on those, >= 1e20 after); all `half`
// when the tensor is absent.
int rotated_pairs(const Meta& m, ModelConfig& c, int half) {
  const auto& T = m.g.tensors();
  auto rf = T.find("rope_freqs.weight");
  if (rf == T.end()) {
    c.notes.push_back("no rope_freqs.weight: full layers rotate all " + std::to_string(half) + " pairs");
    return half;
  }
  const TensorView& r = rf->second;
  const std::string where = m.file + ": tensor 'rope_freqs.weight' (data at byte " + std::to_string(r.file_offset) + ")";
  if (r.shape != std::vector<int64_t>{half})
    throw Error(where + " has shape " + shape_str(r.shape) + ", expected [" + std::to_string(half) + "] (global head dim / 2)");
  int rotated = 0;
  while (rotated < half && r.at(rotated) == 1.0f) ++rotated;
  for (int k = rotated; k < half; ++k)
    if (!(r.at(k) >= 1e20f))
      throw Error(where + ": entry " + std::to_string(k) + " = " + std::to_string(r.at(k)) +
                  ": g4 supports proportional RoPE only (1.0 on the first pairs, >= 1e20 on the rest)");
  if (rotated == 0) throw Error(where + ": no pair rotates (entry 0 is not 1.0)");
  return rotated;
}

// RoPE. Sliding: default over the whole head. Full: proportional, described by rope_freqs.
// Returns the number of rotated pairs of full layers.
int read_rope(const Meta& m, ModelConfig& c) {
  const GgufFile& g = m.g;
  const double theta_full = g.get_float(m.k("rope.freq_base")).value_or(1000000.0);
  const double theta_swa = g.get_float(m.k("rope.freq_base_swa")).value_or(10000.0);
  if (!(theta_full > 0)) m.fail(m.k("rope.freq_base"), "must be > 0");
  if (!(theta_swa > 0)) m.fail(m.k("rope.freq_base_swa"), "must be > 0");
  if (m.get_int(m.k("rope.dimension_count"), c.global_head_dim, 1) != c.global_head_dim)
    m.fail(m.k("rope.dimension_count"), "must equal attention.key_length = " + std::to_string(c.global_head_dim) +
                                           " (Gemma 4 encodes partial rotation in rope_freqs, not n_rot)");
  if (m.get_int(m.k("rope.dimension_count_swa"), c.head_dim, 1) != c.head_dim)
    m.fail(m.k("rope.dimension_count_swa"), "must equal attention.key_length_swa = " + std::to_string(c.head_dim));
  if (g.find(m.k("rope.scaling.type")) || g.find(m.k("rope.scaling.factor"))) {
    const auto f = g.get_float(m.k("rope.scaling.factor"));
    if (f && *f != 1.0) m.fail(m.k("rope.scaling.factor"), "position scaling is not supported for Gemma 4");
  }
  c.rope_sliding = {RopeType::Default, theta_swa, 1.0, 1.0};
  const int rotated = rotated_pairs(m, c, c.global_head_dim / 2);
  c.rope_full = {RopeType::Proportional, theta_full, double(2 * rotated) / double(c.global_head_dim), 1.0};
  // finalize() and the forward pass take int(factor·dg/2) pairs: make that exactly `rotated`.
  if (int(c.rope_full.partial_rotary_factor * c.global_head_dim) / 2 != rotated)
    c.rope_full.partial_rotary_factor = (2.0 * rotated + 0.5) / double(c.global_head_dim);
  return rotated;
}

void read_special_ids(const Meta& m, ModelConfig& c) {
  auto id = [&](const std::string& key, int fallback) {
    const int v = m.get_int(key, fallback, 0);
    if (v >= c.vocab_size) m.fail(key, "= " + std::to_string(v) + " is outside the vocabulary (" + std::to_string(c.vocab_size) + ")");
    return v;
  };
  c.bos_token_id = id("tokenizer.ggml.bos_token_id", 2);
  c.pad_token_id = id("tokenizer.ggml.padding_token_id", 0);
  c.eos_token_ids = {id("tokenizer.ggml.eos_token_id", 1)};
  if (m.g.find("tokenizer.ggml.eot_token_id")) {
    const int eot = id("tokenizer.ggml.eot_token_id", 1);
    if (eot != c.eos_token_ids[0]) c.eos_token_ids.push_back(eot);
  }
}

// Runs ModelConfig::finalize (its errors named after the file) and checks that the derived
// config rotates exactly the pairs rope_freqs.weight says.
void finalize_checked(const Meta& m, ModelConfig& c, int rotated) {
  try {
    c.finalize();
  } catch (const Error& e) {
    throw Error(m.file + ": " + e.what());
  }
  const auto inv = ref::rope_inv_freq_proportional(c.global_head_dim, c.rope_full.theta, c.rope_full.partial_rotary_factor);
  int nonzero = 0;
  for (float f : inv) nonzero += f != 0.0f;
  if (nonzero != rotated)
    throw Error(m.file + ": rope_freqs.weight rotates " + std::to_string(rotated) + " pairs but the config derived from it rotates " +
                std::to_string(nonzero));
}

}  // namespace

ModelConfig config_from_gguf(const GgufFile& g) { return config_from_gguf(g, "gemma4"); }

ModelConfig config_from_gguf(const GgufFile& g, const std::string& arch) {
  const Meta m{g, g.path().string(), arch};
  ModelConfig c;
  read_geometry(m, c);
  const int first_shared = read_layer_types(m, c);
  read_vocab_from_tensors(m, c);
  read_k_eq_v(m, c, first_shared);
  read_kv_heads(m, c);
  read_mlp_widths(m, c, first_shared);
  read_moe(m, c);
  const int rotated = read_rope(m, c);
  read_special_ids(m, c);
  finalize_checked(m, c, rotated);
  return c;
}

}  // namespace g4
