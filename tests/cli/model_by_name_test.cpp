// `--model org/name[:QUANT]` end to end: a synthetic model placed in a fake Hugging Face cache
// (blobs + relative symlinks) loads by name in info, logits, tokenize and quantize, gives the
// same bytes as the same model loaded by path, and a name the cache lacks fails with the hint.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fake_hf_cache.h"
#include "test_util.h"

namespace g4 {
namespace model_by_name_test {

namespace fs = std::filesystem;

// `g4 ARGS` with HF_HUB_CACHE=cache; stdout and stderr together in *out.
int g4_in_cache(const fs::path& cache, const std::string& args, std::string* out) {
  return test::run_command("HF_HUB_CACHE=" + cache.string() + " " + test::g4_binary().string() + " " + args, out);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ModelByName : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --out " + (tmp_ / "tiny").string(), &out)) << out;
    test::FakeHfRepo repo(cache_, "org", "tiny");
    for (const auto& e : fs::directory_iterator(tmp_ / "tiny"))
      repo.copy_in(commit_, e.path().filename().string(), e.path());
    repo.ref("main", commit_);
  }
  // Writes float32 logits of a fixed token list for `model` into `file`.
  void logits(const std::string& model, const fs::path& file) {
    std::string out;
    ASSERT_EQ(0, g4_in_cache(cache_, "logits --model " + model + " --tokens 2,5,7,9 --out " + file.string(), &out))
        << out;
  }

  test::TempDir tmp_;
  fs::path cache_ = tmp_ / "hub";
  std::string commit_ = test::fake_commit('7');
};

TEST_F(ModelByName, InfoSaysWhichSnapshotTheNameResolvedTo) {
  std::string out;
  ASSERT_EQ(0, g4_in_cache(cache_, "info --model org/tiny", &out)) << out;
  const fs::path snapshot = cache_ / "models--org--tiny" / "snapshots" / commit_;
  EXPECT_TRUE(has(out, "source     org/tiny -> " + snapshot.string() + " (revision main, commit " + commit_ + ", "))
      << out;
  EXPECT_TRUE(has(out, "(from HF_HUB_CACHE)")) << out;
  EXPECT_TRUE(has(out, "geometry   vocab")) << "the model itself loaded: " << out;
}

TEST_F(ModelByName, LogitsAndTokensMatchTheModelLoadedByPath) {
  logits(tmp_.path().string() + "/tiny", tmp_ / "by_path.f32");
  logits("org/tiny", tmp_ / "by_name.f32");
  const std::string by_path = test::read_file(tmp_ / "by_path.f32");
  EXPECT_FALSE(by_path.empty());
  EXPECT_EQ(by_path, test::read_file(tmp_ / "by_name.f32"));

  std::string direct, named;
  ASSERT_EQ(0, g4_in_cache(cache_, "tokenize --model " + (tmp_ / "tiny").string() + " --text hello", &direct)) << direct;
  ASSERT_EQ(0, g4_in_cache(cache_, "tokenize --model org/tiny --text hello", &named)) << named;
  ASSERT_TRUE(named.size() > direct.size() && named.compare(named.size() - direct.size(), direct.size(), direct) == 0)
      << "by name: " << named << "by path: " << direct;
  EXPECT_TRUE(has(named, "[g4] model org/tiny -> ")) << named;
}

TEST_F(ModelByName, QuantizeReadsANameAndAGgufRepoPicksByTag) {
  std::string out;
  const fs::path q8 = tmp_ / "tiny-q8.gguf";
  ASSERT_EQ(0, g4_in_cache(cache_, "quantize org/tiny " + q8.string() + " --type q8_0", &out)) << out;
  test::FakeHfRepo gguf(cache_, "org", "tiny-GGUF");
  gguf.copy_in(commit_, "tiny-Q8_0.gguf", q8);
  gguf.add(commit_, "tiny-F16.gguf", "not a model: loading it fails");
  gguf.add(commit_, "mmproj-tiny-f16.gguf", "a vision projector, never the text model");
  gguf.ref("main", commit_);

  logits(q8.string(), tmp_ / "by_path.f32");
  logits("org/tiny-GGUF:q8_0", tmp_ / "by_name.f32");
  EXPECT_EQ(test::read_file(tmp_ / "by_path.f32"), test::read_file(tmp_ / "by_name.f32"));

  EXPECT_NE(0, g4_in_cache(cache_, "info --model org/tiny-GGUF", &out));
  EXPECT_TRUE(has(out, "2 .gguf files") && has(out, "tiny-F16.gguf, tiny-Q8_0.gguf") && !has(out, "mmproj")) << out;
}

TEST_F(ModelByName, MissingRepoAndLocalPathsFailAsBefore) {
  std::string out;
  EXPECT_EQ(1, g4_in_cache(cache_, "info --model org/absent", &out));
  EXPECT_TRUE(has(out, "g4 info: error: org/absent: no such file or directory here") &&
              has(out, "huggingface-cli download org/absent") && has(out, cache_.string()))
      << out;
  EXPECT_EQ(1, g4_in_cache(cache_, "info --model " + (tmp_ / "nowhere").string(), &out));
  EXPECT_FALSE(has(out, "Hugging Face")) << "an absolute path is never a repo id: " << out;
}

}  // namespace model_by_name_test
}  // namespace g4
