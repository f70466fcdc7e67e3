// Loading an assistant drafter: the config's rules, the pairing with a target, and the refusals
// of a mismatched pair, a truncated file, a missing or misshapen tensor.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <functional>

#include "model/assistant.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

std::filesystem::path drafter_fixture_dir(const std::string& variant) {
  return test::fixtures_dir() / "gemma4-assistant-tiny" / variant;
}

// A writable copy of a variant's assistant directory.
std::filesystem::path copy_assistant(const test::TempDir& tmp, const std::string& variant) {
  const auto dst = tmp / "assistant";
  std::filesystem::create_directories(dst);
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(drafter_fixture_dir(variant) / "assistant" / f, dst / f);
  std::filesystem::permissions(dst / "config.json", std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  std::filesystem::permissions(dst / "model.safetensors", std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  return dst;
}

// Rewrites dir/model.safetensors without tensor `drop`, or with `reshape` given a wrong shape.
void rewrite_checkpoint(const std::filesystem::path& dir, const std::string& drop, const std::string& reshape = "") {
  const std::string bytes = test::read_file(dir / "model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  std::vector<TensorSpec> specs;
  std::map<std::string, std::pair<uint64_t, uint64_t>> where;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__" || it.key() == drop) continue;
    const auto& t = it.value();
    TensorSpec s{it.key(), DType::F32, t["shape"].get<std::vector<int64_t>>()};
    s.int64 = t["dtype"] == "I64";
    if (it.key() == reshape) {  // flattened to one dimension
      int64_t numel = 1;
      for (int64_t dim : s.shape) numel *= dim;
      s.shape = {numel};
    }
    where[it.key()] = {t["data_offsets"][0].get<uint64_t>(), t["data_offsets"][1].get<uint64_t>()};
    specs.push_back(s);
  }
  std::filesystem::remove(dir / "model.safetensors");
  write_safetensors(dir / "model.safetensors", specs, [&](const TensorSpec& s, std::byte* out) {
    std::memcpy(out, bytes.data() + 8 + n + where[s.name].first, s.nbytes());
  });
}

void edit_config(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(test::read_file(dir / "config.json"));
  edit(j);
  test::write_file(dir / "config.json", j.dump(2));
}

TEST(AssistantLoad, ReadsBothFixturesAndPairsTheLastKvOwningLayers) {
  for (const std::string v : {"tiny-e-assistant", "tiny-31b-assistant"}) {
    auto target = load_model(drafter_fixture_dir(v) / "target");
    auto d = load_assistant(drafter_fixture_dir(v) / "assistant", *target);
    const auto m = nlohmann::json::parse(test::read_file(drafter_fixture_dir(v) / "manifest.json"));
    EXPECT_EQ(d->pairing.sliding_layer, m["target_kv_layers"]["sliding_attention"].get<int>()) << v;
    EXPECT_EQ(d->pairing.full_layer, m["target_kv_layers"]["full_attention"].get<int>()) << v;
    EXPECT_EQ(d->config.text.num_hidden_layers, 4);
    EXPECT_EQ(d->config.use_ordered_embeddings, v == "tiny-e-assistant");
    EXPECT_EQ(d->token_ordering.size(), v == "tiny-e-assistant" ? 512u : 0u);
  }
}

TEST(AssistantLoad, RefusesAMismatchedPairNamingTheFields) {
  auto other = load_model(drafter_fixture_dir("tiny-31b-assistant") / "target");  // 2 sliding KV heads, not 1
  const std::string e = test::error_of([&] { load_assistant(drafter_fixture_dir("tiny-e-assistant") / "assistant", *other); });
  EXPECT_NE(e.find("KV heads of sliding_attention layers = 1 but target KV heads of layer 4 = 2"), std::string::npos) << e;

  test::TempDir tmp;
  const auto dir = copy_assistant(tmp, "tiny-31b-assistant");
  edit_config(dir, [](nlohmann::json& j) {
    j["backbone_hidden_size"] = 64;
    j["text_config"]["sliding_window"] = 6;
  });
  auto target = load_model(drafter_fixture_dir("tiny-31b-assistant") / "target");
  const std::string f = test::error_of([&] { load_assistant(dir, *target); });
  EXPECT_NE(f.find("backbone_hidden_size = 64 but target hidden_size = 48"), std::string::npos) << f;
  EXPECT_NE(f.find("text_config.sliding_window = 6 but target sliding_window = 5"), std::string::npos) << f;
}

TEST(AssistantLoad, RefusesConfigsTheReferenceRefuses) {
  auto target = load_model(drafter_fixture_dir("tiny-e-assistant") / "target");
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& j) { j["model_type"] = "gemma4"; }, "field 'model_type'"},
      {[](nlohmann::json& j) { j["text_config"]["num_kv_shared_layers"] = 2; }, "field 'num_kv_shared_layers' = 2"},
      {[](nlohmann::json& j) { j["text_config"]["hidden_size_per_layer_input"] = 8; }, "hidden_size_per_layer_input"},
      {[](nlohmann::json& j) { j["num_centroids"] = 30; }, "field 'num_centroids' = 30: must divide"},
      {[](nlohmann::json& j) { j["tie_word_embeddings"] = false; }, "tie_word_embeddings"},
      {[](nlohmann::json& j) { j.erase("backbone_hidden_size"); }, "'backbone_hidden_size' = (absent)"},
  };
  for (const auto& [edit, want] : cases) {
    test::TempDir tmp;
    const auto dir = copy_assistant(tmp, "tiny-e-assistant");
    edit_config(dir, edit);
    const std::string e = test::error_of([&] { load_assistant(dir, *target); });
    EXPECT_NE(e.find(want), std::string::npos) << e;
  }
}

TEST(AssistantLoad, RefusesATruncatedCheckpointNamingTheFile) {
  test::TempDir tmp;
  const auto dir = copy_assistant(tmp, "tiny-e-assistant");
  std::filesystem::resize_file(dir / "model.safetensors", std::filesystem::file_size(dir / "model.safetensors") / 2);
  auto target = load_model(drafter_fixture_dir("tiny-e-assistant") / "target");
  const std::string e = test::error_of([&] { load_assistant(dir, *target); });
  EXPECT_NE(e.find((dir / "model.safetensors").string()), std::string::npos) << e;
  EXPECT_NE(e.find("past the data section"), std::string::npos) << e;
}

TEST(AssistantLoad, RefusesMissingTensorsNamingThem) {
  auto target = load_model(drafter_fixture_dir("tiny-e-assistant") / "target");
  for (const std::string name : {"pre_projection.weight", "post_projection.weight", "masked_embedding.centroids.weight",
                                 "masked_embedding.token_ordering", "model.layers.2.self_attn.q_proj.weight",
                                 "model.layers.3.layer_scalar"}) {
    test::TempDir tmp;
    const auto dir = copy_assistant(tmp, "tiny-e-assistant");
    rewrite_checkpoint(dir, name);
    const std::string e = test::error_of([&] { load_assistant(dir, *target); });
    EXPECT_NE(e.find("missing tensor '" + name + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(dir.string()), std::string::npos) << e;
  }
}

TEST(AssistantLoad, RefusesAMisshapenTensorNamingItAndItsShape) {
  auto target = load_model(drafter_fixture_dir("tiny-31b-assistant") / "target");
  test::TempDir tmp;
  const auto dir = copy_assistant(tmp, "tiny-31b-assistant");
  rewrite_checkpoint(dir, "", "pre_projection.weight");
  const std::string e = test::error_of([&] { load_assistant(dir, *target); });
  EXPECT_NE(e.find("tensor 'pre_projection.weight' has shape [3072], expected [32, 96]"), std::string::npos) << e;
}

TEST(AssistantLoad, RefusesATokenOrderingThatIsNoPermutation) {
  auto target = load_model(drafter_fixture_dir("tiny-e-assistant") / "target");
  test::TempDir tmp;
  const auto dir = copy_assistant(tmp, "tiny-e-assistant");
  std::string bytes = test::read_file(dir / "model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  const uint64_t at = 8 + n + header["masked_embedding.token_ordering"]["data_offsets"][0].get<uint64_t>();
  const int64_t dup = 7;
  std::memcpy(&bytes[at], &dup, 8);
  std::memcpy(&bytes[at + 8], &dup, 8);  // elements 0 and 1 both 7
  test::write_file(dir / "model.safetensors", bytes);
  const std::string e = test::error_of([&] { load_assistant(dir, *target); });
  EXPECT_NE(e.find("'masked_embedding.token_ordering' element 1 = 7: not a permutation"), std::string::npos) << e;
}

}  // namespace
}  // namespace g4
