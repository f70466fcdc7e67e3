// A drafter in llama.cpp's GGUF layout (general.architecture "gemma4-assistant", the tensor names
// of its Gemma4AssistantModel converter, spelled out here from shared/docs/gemma4-speculative.md
// §1.3 rather than taken from g4's tables) against the shared fixtures' float64 draft logits, and
// against the same drafter read from safetensors; and the refusals of a broken or mismatched file.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>
#include <set>

#include "model/assistant.h"
#include "model/assistant_step.h"
#include "model/dense_kv_store.h"
#include "model/forward_cached.h"
#include "model/gguf_config.h"
#include "model/gguf_writer.h"
#include "model/safetensors.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/error.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
constexpr float kGgufDraftTolerance = 1e-3f;  // the fixture README's bound

fs::path drafter_fixture(const std::string& variant) { return test::fixtures_dir() / "gemma4-assistant-tiny" / variant; }

// safetensors name -> llama.cpp GGUF name (docs §1.3), for one drafter layer or the globals.
std::string llama_cpp_name(const std::string& st) {
  static const std::vector<std::pair<std::string, std::string>> global = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"pre_projection.weight", "nextn.pre_projection.weight"},
      {"post_projection.weight", "nextn.post_projection.weight"},
      {"masked_embedding.centroids.weight", "masked_embd_centroids.weight"}};
  static const std::vector<std::pair<std::string, std::string>> layer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"layer_scalar", "layer_output_scale.weight"}};
  for (const auto& [a, b] : global)
    if (st == a) return b;
  const std::string head = "model.layers.";
  const size_t dot = st.find('.', head.size());
  const std::string rest = st.substr(dot + 1);
  for (const auto& [a, b] : layer)
    if (rest == a) return "blk." + st.substr(head.size(), dot - head.size()) + "." + b;
  ADD_FAILURE() << "no GGUF name for " << st;
  return st;
}

// What to write: the whole drafter, or with a change (a tensor dropped, a key changed).
struct GgufEdit {
  bool centroid_head = true;                     // false: drop masked_embd_* as llama.cpp's converter does
  std::set<std::string> drop;                    // GGUF tensor names left out
  std::function<void(GgufWriter&)> metadata;     // applied after the converter's keys
  std::vector<std::string> extra_tensors;        // F32 [4] tensors added under these names
};

GgufEdit dense_head() {
  GgufEdit e;
  e.centroid_head = false;
  return e;
}
GgufEdit dropping(const std::string& name) {
  GgufEdit e;
  e.drop = {name};
  return e;
}
GgufEdit adding(const std::string& name) {
  GgufEdit e;
  e.extra_tensors = {name};
  return e;
}
GgufEdit setting(std::function<void(GgufWriter&)> f) {
  GgufEdit e;
  e.metadata = std::move(f);
  return e;
}

// Writes the fixture variant's drafter as a gemma4-assistant GGUF (all weights F32).
fs::path write_drafter_gguf(const std::string& variant, const fs::path& out, const GgufEdit& edit = {}) {
  const fs::path dir = drafter_fixture(variant) / "assistant";
  const AssistantConfig cfg = load_assistant_config(dir / "config.json");
  const SafetensorsArchive ar = SafetensorsArchive::open(dir);
  GgufWriter w;
  add_gemma4_metadata(w, cfg.text, "tiny drafter", "gemma4-assistant");
  w.set_u32("gemma4-assistant.attention.shared_kv_layers", uint32_t(cfg.text.num_hidden_layers));
  w.set_u32("gemma4-assistant.embedding_length_out", uint32_t(cfg.backbone_hidden_size));
  w.set_u32("gemma4-assistant.nextn_predict_layers", uint32_t(cfg.text.num_hidden_layers));
  // llama.cpp's converter writes no top-k (it drops the centroid head); g4 reads this key.
  if (cfg.use_ordered_embeddings)
    w.set_u32("gemma4-assistant.centroid_intermediate_top_k", uint32_t(cfg.centroid_intermediate_top_k));
  if (edit.metadata) edit.metadata(w);
  std::vector<const TensorView*> src;  // nullptr: rope_freqs, the ordering, or an extra tensor
  const std::vector<float> rope = gemma4_rope_freqs(cfg.text);
  w.add_tensor("rope_freqs.weight", DType::F32, {int64_t(rope.size())});
  src.push_back(nullptr);
  for (const auto& [name, view] : ar.tensors()) {
    const std::string gg = llama_cpp_name(name);
    if (edit.drop.count(gg) || (!edit.centroid_head && gg.rfind("masked_embd", 0) == 0)) continue;
    w.add_tensor(gg, DType::F32, view.shape);
    src.push_back(&view);
  }
  const Int64Tensor* ordering = nullptr;
  if (auto it = ar.int64_tensors().find("masked_embedding.token_ordering"); it != ar.int64_tensors().end()) {
    if (edit.centroid_head && !edit.drop.count("masked_embd_ordering")) {
      ordering = &it->second;
      w.add_i64_tensor("masked_embd_ordering", ordering->shape);
      src.push_back(nullptr);
    }
  }
  for (const auto& name : edit.extra_tensors) {
    w.add_tensor(name, DType::F32, {4});
    src.push_back(nullptr);
  }
  w.write(out, [&](size_t i, std::byte* dst) {
    const TensorView* v = src[i];
    const std::string& name = w.tensors()[i].name;
    if (name == "rope_freqs.weight") {
      std::memcpy(dst, rope.data(), rope.size() * 4);
    } else if (name == "masked_embd_ordering") {
      std::memcpy(dst, ordering->data, size_t(ordering->numel()) * 8);
    } else if (v) {
      const int64_t cols = v->shape.back(), rows = v->numel() / cols;
      for (int64_t r = 0; r < rows; ++r) v->row_to_f32(r, reinterpret_cast<float*>(dst) + r * cols);
    }
  });
  return out;
}

// A copy of GGUF `src` without metadata key `drop_key` and with an I64 [3] tensor `add_i64`
// (when not empty).
fs::path copy_gguf(const fs::path& src, const fs::path& dst, const std::string& drop_key, const std::string& add_i64 = "") {
  auto g = GgufFile::open(src);
  GgufWriter w;
  for (const auto& [key, value] : g->metadata())
    if (key != drop_key && key != "general.alignment") w.set_value(key, value);
  for (const auto& [name, v] : g->tensors()) w.add_tensor(name, v.dtype, v.shape);
  for (const auto& [name, t] : g->int_tensors()) w.add_i64_tensor(name, t.shape);
  if (!add_i64.empty()) w.add_i64_tensor(add_i64, {3});
  w.write(dst, [&](size_t i, std::byte* out) {
    const std::string& name = w.tensors()[i].name;
    if (auto it = g->tensors().find(name); it != g->tensors().end()) std::memcpy(out, it->second.data, it->second.nbytes);
    else if (auto t = g->int_tensors().find(name); t != g->int_tensors().end())
      std::memcpy(out, t->second.data, size_t(t->second.numel()) * 8);
  });
  return dst;
}

// The target over tokens [0, p), then k draft steps from tokens[p] and hidden row p-1.
std::vector<DraftStep> gguf_draft_from(const Model& target, const AssistantModel& d, const std::vector<int>& tokens, int64_t p,
                                  int k, const blocks::Exec& ex) {
  DenseKvStore kv(target.config);
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows;
  for (int64_t t = 0; t < p; ++t) rows.push_back({seq, t, tokens[size_t(t)], t == p - 1});
  std::vector<float> logits, hidden;
  forward_cached(target, rows, kv, ex, logits, &hidden);
  return draft(d, target, kv, seq, p, tokens[size_t(p)], hidden, k, ex);
}

class GgufDrafter : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    manifest_ = nlohmann::json::parse(test::read_file(drafter_fixture(GetParam()) / "manifest.json"));
    tokens_ = manifest_["tokens"].get<std::vector<int>>();
    target_ = load_model(drafter_fixture(GetParam()) / "target");
  }
  nlohmann::json manifest_;
  std::vector<int> tokens_;
  std::unique_ptr<Model> target_;
  test::TempDir tmp_;
};

// Every start's k steps: within the fixture's tolerance of the float64 numbers, the same tokens,
// and bit for bit what the safetensors drafter gives (the same weights, the same code after load).
TEST_P(GgufDrafter, MatchesTheFixtureAndTheSafetensorsDrafter) {
  const auto gguf = load_assistant(write_drafter_gguf(GetParam(), tmp_ / "drafter.gguf"), *target_);
  const auto st = load_assistant(drafter_fixture(GetParam()) / "assistant", *target_);
  EXPECT_EQ(gguf->stack->format, "gguf");
  EXPECT_EQ(gguf->config.use_ordered_embeddings, st->config.use_ordered_embeddings);
  EXPECT_EQ(gguf->config.centroid_intermediate_top_k, st->config.centroid_intermediate_top_k);
  EXPECT_EQ(gguf->pairing.sliding_layer, st->pairing.sliding_layer);
  EXPECT_EQ(gguf->pairing.full_layer, st->pairing.full_layer);
  const auto want = test::read_f32(drafter_fixture(GetParam()) / "draft_logits.f32");  // [S, k, V]
  const int64_t V = manifest_["vocab_size"].get<int64_t>();
  const int k = manifest_["k"].get<int>();
  ThreadPool pool(2);
  const ops::MatmulContext mm = ops::make_matmul_context(
      &pool, host_cpu(), std::max(target_->config.widest_matmul_input(), gguf->config.widest_matmul_input()), false, false);
  blocks::Exec simd;
  simd.matmul = &mm;
  float worst = 0;
  for (const blocks::Exec& ex : {blocks::Exec{}, simd}) {
    for (size_t s = 0; s < manifest_["starts"].size(); ++s) {
      const int64_t p = manifest_["starts"][s]["p"].get<int64_t>();
      const auto mine = gguf_draft_from(*target_, *gguf, tokens_, p, k, ex);
      const auto theirs = gguf_draft_from(*target_, *st, tokens_, p, k, ex);
      const auto want_tokens = manifest_["starts"][s]["draft_tokens"].get<std::vector<int>>();
      for (int j = 0; j < k; ++j) {
        const size_t at = (s * size_t(k) + size_t(j)) * size_t(V);
        worst = std::max(worst, test::max_abs_diff(mine[size_t(j)].logits.data(), &want[at], size_t(V)));
        EXPECT_EQ(mine[size_t(j)].token, want_tokens[size_t(j)]) << "p=" << p << " step " << j + 1;
        EXPECT_EQ(mine[size_t(j)].logits, theirs[size_t(j)].logits) << "p=" << p << " step " << j + 1;
        EXPECT_EQ(mine[size_t(j)].h_next, theirs[size_t(j)].h_next) << "p=" << p << " step " << j + 1;
      }
    }
  }
  EXPECT_LE(worst, kGgufDraftTolerance);
}

INSTANTIATE_TEST_SUITE_P(BothVariants, GgufDrafter, ::testing::Values("tiny-e-assistant", "tiny-31b-assistant"));

// llama.cpp's converter drops masked_embd_*: such a file scores the whole vocabulary, and the
// fixture's candidate logits (which equal the dense head's there, README) still hold.
TEST(GgufDrafterCentroids, WithoutTheCentroidTablesTheHeadIsDense) {
  const std::string variant = "tiny-e-assistant";
  const auto target = load_model(drafter_fixture(variant) / "target");
  test::TempDir tmp;
  const auto d = load_assistant(write_drafter_gguf(variant, tmp / "dense.gguf", dense_head()), *target);
  EXPECT_FALSE(d->config.use_ordered_embeddings);
  const auto manifest = nlohmann::json::parse(test::read_file(drafter_fixture(variant) / "manifest.json"));
  const auto tokens = manifest["tokens"].get<std::vector<int>>();
  const auto want = test::read_f32(drafter_fixture(variant) / "draft_logits.f32");
  const auto cands = test::read_i32(drafter_fixture(variant) / "draft_candidates.i32");  // [S, k, 64]
  const int64_t V = manifest["vocab_size"].get<int64_t>();
  const size_t k = manifest["k"].get<size_t>(), n_cand = cands.size() / (manifest["starts"].size() * k);
  for (size_t s = 0; s < manifest["starts"].size(); ++s) {
    const int64_t p = manifest["starts"][s]["p"].get<int64_t>();
    const auto steps = gguf_draft_from(*target, *d, tokens, p, 1, {});
    for (size_t c = 0; c < n_cand; ++c) {
      const int id = cands[s * k * n_cand + c];
      EXPECT_NEAR(steps[0].logits[size_t(id)], want[s * k * size_t(V) + size_t(id)], kGgufDraftTolerance) << "p=" << p << " token " << id;
    }
  }
}

// Centroid tables without a top-k key: the released drafters' 32 (here all 32 centroids), said.
TEST(GgufDrafterCentroids, WithoutATopKKeyTheReleasedValueIsUsedAndNoted) {
  const std::string variant = "tiny-e-assistant";
  const auto target = load_model(drafter_fixture(variant) / "target");
  test::TempDir tmp;
  GgufEdit e;
  e.metadata = [](GgufWriter& w) { w.set_u32("gemma4-assistant.centroid_intermediate_top_k", 4); };
  const auto keyed = load_assistant(write_drafter_gguf(variant, tmp / "keyed.gguf", e), *target);
  EXPECT_EQ(keyed->config.centroid_intermediate_top_k, 4);
  const fs::path plain = write_drafter_gguf(variant, tmp / "plain.gguf");
  const auto d = load_assistant(copy_gguf(plain, tmp / "nokey.gguf", "gemma4-assistant.centroid_intermediate_top_k"), *target);
  EXPECT_TRUE(d->config.use_ordered_embeddings);
  EXPECT_EQ(d->config.centroid_intermediate_top_k, 32);
  bool noted = false;
  for (const auto& n : d->config.text.notes) noted = noted || n.find("centroid_intermediate_top_k") != std::string::npos;
  EXPECT_TRUE(noted);
}

// A llama.cpp-style repo snapshot: a directory without config.json holding one .gguf.
TEST(GgufDrafterDirectory, ADirectoryWithOneGgufIsThatFile) {
  const std::string variant = "tiny-31b-assistant";
  const auto target = load_model(drafter_fixture(variant) / "target");
  test::TempDir tmp;
  fs::create_directories(tmp / "repo");
  const fs::path file = write_drafter_gguf(variant, tmp / "repo" / "drafter-f32.gguf");
  const auto d = load_assistant(tmp / "repo", *target);
  EXPECT_EQ(d->path, file);
  EXPECT_EQ(d->stack->format, "gguf");
  write_drafter_gguf(variant, tmp / "repo" / "drafter-2.gguf");
  EXPECT_NE(test::error_of([&] { load_assistant(tmp / "repo", *target); }).find("2 .gguf files: name the one to load"),
            std::string::npos);
}

TEST(GgufDrafterRefusals, NameTheKeyOrTensor) {
  const std::string variant = "tiny-e-assistant";
  const auto target = load_model(drafter_fixture(variant) / "target");
  test::TempDir tmp;
  auto refused = [&](const GgufEdit& edit) {
    return test::error_of([&] { load_assistant(write_drafter_gguf(variant, tmp / "bad.gguf", edit), *target); });
  };
  EXPECT_NE(refused(dropping("nextn.pre_projection.weight")).find("missing tensor 'nextn.pre_projection.weight'"),
            std::string::npos);
  EXPECT_NE(refused(dropping("blk.2.attn_q.weight")).find("blk.i.*"), std::string::npos);
  EXPECT_NE(refused(dropping("masked_embd_ordering")).find("has only masked_embd_centroids.weight"), std::string::npos);
  EXPECT_NE(refused(adding("blk.0.attn_k.weight")).find("unknown tensor 'blk.0.attn_k.weight'"),
            std::string::npos);
  const std::string out_key = "gemma4-assistant.embedding_length_out";
  EXPECT_NE(refused(setting([&](GgufWriter& w) { w.set_u32(out_key, 40); })).find("backbone_hidden_size = 40"),
            std::string::npos);  // the pairing names it: the target's hidden size is 48
  EXPECT_NE(refused(setting([](GgufWriter& w) { w.set_u32("gemma4-assistant.nextn_predict_layers", 3); }))
                .find("nextn_predict_layers' (byte"),
            std::string::npos);
  EXPECT_NE(refused(setting([](GgufWriter& w) { w.set_u32("gemma4-assistant.attention.shared_kv_layers", 2); }))
                .find("shares all its layers' K/V"),
            std::string::npos);
  // An integer tensor neither reader knows, in a drafter and in a target: refused, not ignored.
  const fs::path good = write_drafter_gguf(variant, tmp / "good.gguf");
  EXPECT_NE(test::error_of([&] { load_assistant(copy_gguf(good, tmp / "i.gguf", "", "extra_ids"), *target); })
                .find("unknown integer tensor 'extra_ids' [3]"),
            std::string::npos);
  const fs::path target_gguf_src = test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "model.gguf";
  EXPECT_NE(test::error_of([&] { load_model(copy_gguf(target_gguf_src, tmp / "t.gguf", "", "masked_embd_ordering")); })
                .find("unknown integer tensor 'masked_embd_ordering' [3]: not part of the gemma4 architecture"),
            std::string::npos);
  // A target GGUF handed over as a drafter, and a drafter GGUF handed over as a model.
  const fs::path target_gguf = test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "model.gguf";
  EXPECT_NE(test::error_of([&] { load_assistant(target_gguf, *target); }).find("a Gemma 4 model, not a gemma4-assistant drafter"),
            std::string::npos);
  const fs::path drafter = write_drafter_gguf(variant, tmp / "ok.gguf");
  EXPECT_NE(test::error_of([&] { load_model(drafter); }).find("a drafter, not a model"), std::string::npos);
  // The E-style drafter against the 31B-style target: every differing field is named.
  const auto other = load_model(drafter_fixture("tiny-31b-assistant") / "target");
  EXPECT_NE(test::error_of([&] { load_assistant(drafter, *other); }).find("is not a drafter for"), std::string::npos);
}

}  // namespace
}  // namespace g4
