// Models by name: repo ids resolved in a hub cache written as huggingface_hub writes it (blobs
// and relative symlinks), the cache root's precedence, and every failure naming what is wrong.
#include "platform/hf_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "fake_hf_cache.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace hf_cache_test {

namespace fs = std::filesystem;
using test::fake_commit;
using test::FakeHfRepo;

// The message of the Error that resolving `spec` in `root` throws ("" when it resolves).
std::string failure(const std::string& spec, const HfCacheRoot& root) {
  try {
    resolve_hf_model(*parse_hf_repo_spec(spec), root);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// org/model holding only config.json at commit aaa..., refs/main naming `main_commit`.
FakeHfRepo config_only_repo(const fs::path& root, const std::string& main_commit) {
  FakeHfRepo repo(root, "org", "model");
  repo.add(fake_commit('a'), "config.json", "{}");
  repo.ref("main", main_commit);
  return repo;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(HfCache, ParsesOnlyTheRepoIdForm) {
  const auto s = parse_hf_repo_spec("google/gemma-4-e2b-it:Q4_K_M");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->repo, "google/gemma-4-e2b-it");
  EXPECT_EQ(s->suffix, "Q4_K_M");
  EXPECT_EQ(parse_hf_repo_spec("org/name")->suffix, "");
  EXPECT_EQ(parse_hf_repo_spec("org/name:pr/1")->suffix, "pr/1");
  for (const char* bad : {"model.gguf", "/abs/path", "./org/name", "../org/name", ".org/name", "a/b/c", "org/",
                          "/name", "org/name:", "org/na me", "org/..", "org/name:../../x", "org/name:/x"})
    EXPECT_FALSE(parse_hf_repo_spec(bad)) << bad;
}

TEST(HfCache, RootFollowsHuggingFaceHubPrecedence) {
  test::ScopedEnv env;
  env.set("HF_HUB_CACHE", "/a/hub-cache");
  env.set("HUGGINGFACE_HUB_CACHE", "/b/legacy");
  env.set("HF_HOME", "/c/hf-home");
  env.set("XDG_CACHE_HOME", "/d/xdg");
  env.set("HOME", "/e/home");
  EXPECT_EQ(hf_cache_root().path, "/a/hub-cache");
  EXPECT_EQ(hf_cache_root().chosen_by, "HF_HUB_CACHE");
  env.set("HF_HUB_CACHE", std::nullopt);
  EXPECT_EQ(hf_cache_root().path, "/b/legacy");
  env.set("HUGGINGFACE_HUB_CACHE", std::nullopt);
  EXPECT_EQ(hf_cache_root().path, "/c/hf-home/hub");
  EXPECT_EQ(hf_cache_root().chosen_by, "HF_HOME");
  env.set("HF_HOME", std::nullopt);
  EXPECT_EQ(hf_cache_root().path, "/d/xdg/huggingface/hub");
  env.set("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(hf_cache_root().path, "/e/home/.cache/huggingface/hub");
  EXPECT_EQ(hf_cache_root().chosen_by, "HOME");
  env.set("HF_HOME", "~/elsewhere");  // expanded, as huggingface_hub does
  EXPECT_EQ(hf_cache_root().path, "/e/home/elsewhere/hub");
  env.set("HF_HOME", "");  // empty counts as unset
  EXPECT_EQ(hf_cache_root().chosen_by, "HOME");
  env.set("HOME", std::nullopt);
  EXPECT_THROW(hf_cache_root(), Error);
}

TEST(HfCache, SafetensorsRepoResolvesToTheSnapshotOfEachRevision) {
  test::TempDir tmp;
  const HfCacheRoot root{tmp.path(), "HF_HUB_CACHE"};
  FakeHfRepo repo(tmp.path(), "org", "model");
  for (char c : {'a', 'b'}) {
    repo.add(fake_commit(c), "config.json", std::string("{\"rev\": \"") + c + "\"}");
    repo.add(fake_commit(c), "model.safetensors", "weights");
  }
  repo.ref("main", fake_commit('a'));
  repo.ref("v2", fake_commit('b'));

  const HfResolved r = resolve_hf_model(*parse_hf_repo_spec("org/model"), root);
  EXPECT_EQ(r.revision, "main");
  EXPECT_EQ(r.commit, fake_commit('a'));
  EXPECT_EQ(r.path, repo.snapshot(fake_commit('a')));
  EXPECT_EQ(test::read_file(r.path / "config.json"), "{\"rev\": \"a\"}") << "the symlink reaches its blob";
  EXPECT_TRUE(has(r.describe(), fake_commit('a')) && has(r.describe(), tmp.path().string()) &&
              has(r.describe(), "HF_HUB_CACHE"))
      << r.describe();

  const HfResolved v2 = resolve_hf_model(*parse_hf_repo_spec("org/model:v2"), root);
  EXPECT_EQ(v2.revision, "v2");
  EXPECT_EQ(v2.path, repo.snapshot(fake_commit('b')));

  const HfResolved by_commit = resolve_hf_model(*parse_hf_repo_spec("org/model:" + fake_commit('b')), root);
  EXPECT_EQ(by_commit.commit, fake_commit('b'));
  EXPECT_EQ(by_commit.path, repo.snapshot(fake_commit('b')));
}

TEST(HfCache, GgufRepoPicksTheFileByQuantTag) {
  test::TempDir tmp;
  const HfCacheRoot root{tmp.path(), "HF_HOME"};
  FakeHfRepo repo(tmp.path(), "org", "m-GGUF");
  const std::string c = fake_commit('c');
  for (const char* f : {"m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m-Q8_0.gguf", "m-UD-Q4_K_XL.gguf", "mmproj-m-F16.gguf"})
    repo.add(c, f, f);
  repo.add(c, "README.md", "readme");
  repo.ref("main", c);

  const auto pick = [&](const std::string& spec) {
    return resolve_hf_model(*parse_hf_repo_spec(spec), root).path.filename().string();
  };
  EXPECT_EQ(pick("org/m-GGUF:Q4_K_M"), "m-Q4_K_M.gguf");
  EXPECT_EQ(pick("org/m-GGUF:q8_0"), "m-Q8_0.gguf") << "case-insensitive";
  EXPECT_EQ(pick("org/m-GGUF:Q4_K_XL"), "m-UD-Q4_K_XL.gguf");
  EXPECT_EQ(pick("org/m-GGUF:UD-Q4_K_XL"), "m-UD-Q4_K_XL.gguf");
  const HfResolved r = resolve_hf_model(*parse_hf_repo_spec("org/m-GGUF:Q8_0"), root);
  EXPECT_EQ(r.quant, "Q8_0");
  EXPECT_EQ(r.revision, "main");

  const std::string ambiguous = failure("org/m-GGUF:Q4_K", root);
  EXPECT_TRUE(has(ambiguous, "m-Q4_K_M.gguf") && has(ambiguous, "m-Q4_K_S.gguf") && !has(ambiguous, "Q8_0"))
      << ambiguous;
  const std::string untagged = failure("org/m-GGUF", root);
  EXPECT_TRUE(has(untagged, "4 .gguf files") && has(untagged, "org/m-GGUF:TAG") && !has(untagged, "mmproj"))
      << untagged;
  const std::string nomatch = failure("org/m-GGUF:Q5_K_M", root);
  EXPECT_TRUE(has(nomatch, "matches the quant tag 'Q5_K_M'") && has(nomatch, "m-Q8_0.gguf")) << nomatch;
  EXPECT_TRUE(has(failure("org/m-GGUF:mmproj", root), "mmproj files are not models"));
}

TEST(HfCache, RefsWinOverQuantTagsAndOneGgufNeedsNoTag) {
  test::TempDir tmp;
  const HfCacheRoot root{tmp.path(), "HF_HUB_CACHE"};
  FakeHfRepo repo(tmp.path(), "org", "one-GGUF");
  repo.add(fake_commit('1'), "one-Q8_0.gguf", "old");
  repo.add(fake_commit('2'), "one-Q4_0.gguf", "new");
  repo.add(fake_commit('2'), "mmproj-one-f16.gguf", "projector");
  repo.ref("main", fake_commit('2'));
  repo.ref("Q8_0", fake_commit('1'));  // a branch named like a tag is a revision
  EXPECT_EQ(resolve_hf_model(*parse_hf_repo_spec("org/one-GGUF"), root).path.filename(), "one-Q4_0.gguf");
  const HfResolved r = resolve_hf_model(*parse_hf_repo_spec("org/one-GGUF:Q8_0"), root);
  EXPECT_EQ(r.revision, "Q8_0");
  EXPECT_EQ(r.quant, "");
  EXPECT_EQ(r.path.filename(), "one-Q8_0.gguf");
}

TEST(HfCache, MissingRepoNamesTheCacheAndTheDownloadCommand) {
  test::TempDir tmp;
  FakeHfRepo(tmp.path(), "Org", "Model");
  const std::string e = failure("org/model", {tmp.path(), "HF_HUB_CACHE"});
  for (const char* part : {"no models--org--model", "(from HF_HUB_CACHE)", "g4 pull does not exist yet",
                           "huggingface-cli download org/model", "it has models--Org--Model"})
    EXPECT_TRUE(has(e, part)) << part << " in: " << e;
  EXPECT_TRUE(has(e, tmp.path().string())) << e;
  const std::string no_root = failure("org/model", {tmp.path() / "nothing", "HOME"});
  EXPECT_TRUE(has(no_root, "does not exist") && has(no_root, "HF_HUB_CACHE and HF_HOME are not set")) << no_root;
}

TEST(HfCache, MissingRevisionListsTheRefs) {
  test::TempDir tmp;
  FakeHfRepo repo = config_only_repo(tmp.path(), fake_commit('a'));
  repo.ref("pr/3", fake_commit('a'));
  const HfCacheRoot root{tmp.path(), "HF_HUB_CACHE"};
  EXPECT_EQ(resolve_hf_model(*parse_hf_repo_spec("org/model:pr/3"), root).commit, fake_commit('a'));
  // Without a .gguf in main's snapshot, an unknown suffix is neither a revision nor a tag.
  const std::string e = failure("org/model:v9", root);
  EXPECT_TRUE(has(e, "'v9' is no revision") && has(e, "main, pr/3")) << e;
  fs::remove(repo.dir() / "refs" / "main");
  const std::string no_main = failure("org/model", root);
  EXPECT_TRUE(has(no_main, "revision 'main' is not in") && has(no_main, "refs present: pr/3")) << no_main;
}

TEST(HfCache, MissingSnapshotNamesTheCommit) {
  test::TempDir tmp;
  config_only_repo(tmp.path(), fake_commit('d'));
  const HfCacheRoot root{tmp.path(), "HF_HUB_CACHE"};
  const std::string e = failure("org/model", root);
  EXPECT_TRUE(has(e, "refs/main names commit " + fake_commit('d')) && has(e, "snapshots present: " + fake_commit('a')))
      << e;
  const std::string by_hash = failure("org/model:" + fake_commit('e'), root);
  EXPECT_TRUE(has(by_hash, "commit " + fake_commit('e') + " but")) << by_hash;
}

TEST(HfCache, DanglingSymlinkNamesTheFileAndTheBlob) {
  test::TempDir tmp;
  FakeHfRepo repo(tmp.path(), "org", "model");
  const std::string c = fake_commit('a');
  repo.add(c, "config.json", "{}");
  const fs::path blob = repo.add_dangling(c, "model-00002-of-00002.safetensors");
  repo.ref("main", c);
  const HfCacheRoot root{tmp.path(), "HF_HUB_CACHE"};
  std::string e = failure("org/model", root);
  EXPECT_TRUE(has(e, "model-00002-of-00002.safetensors links to the missing blob " + blob.string()) &&
              has(e, "huggingface-cli download org/model"))
      << e;
  test::write_file(blob.string() + ".incomplete", "half");
  e = failure("org/model", root);
  EXPECT_TRUE(has(e, ".incomplete is there: the download was interrupted")) << e;

  // In a GGUF repo only the picked file must be whole: another quant still downloading is fine.
  FakeHfRepo gguf(tmp.path(), "org", "g-GGUF");
  gguf.add(c, "g-Q8_0.gguf", "GGUF");
  gguf.add_dangling(c, "g-Q4_0.gguf");
  gguf.ref("main", c);
  EXPECT_EQ(resolve_hf_model(*parse_hf_repo_spec("org/g-GGUF:Q8_0"), root).path.filename(), "g-Q8_0.gguf");
  EXPECT_TRUE(has(failure("org/g-GGUF:Q4_0", root), "g-Q4_0.gguf links to the missing blob"));
}

TEST(HfCache, SnapshotWithoutAModelSaysWhatItHolds) {
  test::TempDir tmp;
  FakeHfRepo repo(tmp.path(), "org", "model");
  repo.add(fake_commit('a'), "README.md", "readme");
  repo.add(fake_commit('a'), "tokenizer.json", "{}");
  repo.ref("main", fake_commit('a'));
  const std::string e = failure("org/model", {tmp.path(), "HF_HUB_CACHE"});
  EXPECT_TRUE(has(e, "holds neither config.json nor a .gguf file") && has(e, "README.md, tokenizer.json")) << e;
}

TEST(HfCache, LocalPathsWinAndOtherStringsAreLeftAlone) {
  test::TempDir tmp;
  test::ScopedEnv env;
  env.set("HF_HUB_CACHE", (tmp.path() / "hub").string());
  const FakeHfRepo repo = config_only_repo(tmp.path() / "hub", fake_commit('a'));
  const fs::path cwd = fs::current_path();
  fs::create_directories(tmp.path() / "work" / "org" / "model");
  fs::current_path(tmp.path() / "work");
  const bool local_wins = !resolve_model_name("org/model").has_value();
  fs::current_path(cwd);
  EXPECT_TRUE(local_wins) << "a directory org/model in the working directory is loaded as a path";
  const auto named = resolve_model_name("org/model");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->path, repo.snapshot(fake_commit('a')));
  EXPECT_EQ(named->root.chosen_by, "HF_HUB_CACHE");
  EXPECT_FALSE(resolve_model_name("missing.gguf")) << "no repo-id form: the loader reports the missing path";
  EXPECT_FALSE(resolve_model_name("./org/model"));
  EXPECT_THROW(resolve_model_name("org/absent"), Error);
}

}  // namespace hf_cache_test
}  // namespace g4
