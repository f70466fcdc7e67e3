// `g4 pull` against a local HTTP server that serves synthetic repositories over the hub's URL
// scheme (revision listing with sizes and hashes, resolve with a redirect to a CDN path, Range
// requests): the default selection, the cache layout other tools read, and every failure: 401,
// 403 gated, 404, a transfer cut then resumed, a wrong hash, a full disk, a pull killed midway.
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What the hub lists for a file, computed here in one shot (independently of g4's streaming
// hash): sha256 of the bytes for LFS files, the git blob id (sha1 of "blob <n>\0" + bytes) else.
std::string digest(const std::string& bytes, bool sha256) {
  const std::string data = sha256 ? bytes : "blob " + std::to_string(bytes.size()) + std::string(1, '\0') + bytes;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, sha256 ? EVP_sha256() : EVP_sha1(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += {hex[md[i] >> 4], hex[md[i] & 15]};
  return out;
}

struct HubFile {
  std::string bytes;
  bool lfs;
  std::string blob() const { return digest(bytes, lfs); }
};

// The fake hub. Faults apply to the CDN path of LFS files.
class FakeHub {
 public:
  std::map<std::string, std::map<std::string, HubFile>> repos;  // repo -> file -> content
  std::string commit = "0123456789abcdef0123456789abcdef01234567";
  std::string gated_repo, token = "hf_good";
  std::atomic<int> cut_next{0};       // this many CDN replies stop halfway
  std::atomic<bool> corrupt{false};   // CDN replies flip a byte
  std::atomic<int> slow_ms{0};        // sleep per 16 KiB sent
  std::mutex mu;
  std::vector<std::string> ranges;    // Range headers the CDN saw

  FakeHub() {
    svr_.Get(R"(/api/models/([^/]+/[^/]+)/revision/([^/?]+))", [this](const httplib::Request& q, httplib::Response& r) { listing(q, r); });
    svr_.Get(R"(/([^/]+/[^/]+)/resolve/([0-9a-f]+)/(.+))", [this](const httplib::Request& q, httplib::Response& r) {
      if (!allowed(q.matches[1], q, r)) return;
      const auto& files = repos[q.matches[1]];
      auto it = files.find(q.matches[3]);
      if (it == files.end() || q.matches[2] != commit) {
        r.status = 404;
        r.set_header("X-Error-Code", "EntryNotFound");
        return;
      }
      r.status = 302;
      r.set_header("Location", "/cdn/" + std::string(q.matches[1]) + "/" + std::string(q.matches[3]));
    });
    svr_.Get(R"(/cdn/([^/]+/[^/]+)/(.+))", [this](const httplib::Request& q, httplib::Response& r) { cdn(q, r); });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeHub() {
    svr_.stop();
    thread_.join();
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  bool allowed(const std::string& repo, const httplib::Request& q, httplib::Response& r) {
    if (!repos.count(repo)) {
      r.status = 401;  // the hub's answer for a repository that is missing or private
      r.set_header("X-Error-Code", "RepoNotFound");
      return false;
    }
    if (repo != gated_repo || q.get_header_value("Authorization") == "Bearer " + token) return true;
    r.status = q.has_header("Authorization") ? 403 : 401;
    r.set_header("X-Error-Code", "GatedRepo");
    r.set_header("X-Error-Message", "Access to model " + repo + " is restricted.");
    return false;
  }
  void listing(const httplib::Request& q, httplib::Response& r) {
    const std::string repo = q.matches[1];
    if (!allowed(repo, q, r)) return;
    if (q.matches[2] != "main" && q.matches[2] != commit) {
      r.status = 404;
      r.set_header("X-Error-Code", "RevisionNotFound");
      return;
    }
    json sib = json::array();
    for (const auto& [name, f] : repos[repo]) {
      json s = {{"rfilename", name}};
      if (f.lfs) s["lfs"] = {{"sha256", f.blob()}, {"size", f.bytes.size()}};
      else s["blobId"] = f.blob(), s["size"] = f.bytes.size();
      sib.push_back(s);
    }
    r.set_content(json{{"id", repo}, {"sha", commit}, {"siblings", sib}}.dump(), "application/json");
  }
  void cdn(const httplib::Request& q, httplib::Response& r) {
    const HubFile& f = repos[q.matches[1]][q.matches[2]];
    {
      std::lock_guard<std::mutex> l(mu);
      if (q.has_header("Range")) ranges.push_back(q.get_header_value("Range"));
    }
    const bool cut = f.lfs && cut_next > 0 && cut_next-- > 0;
    std::string served = f.bytes;
    if (corrupt && f.lfs) served[served.size() / 2] ^= 1;
    const int slow = f.lfs ? slow_ms.load() : 0;
    r.set_content_provider(served.size(), "application/octet-stream",
                           [served, cut, slow](size_t off, size_t len, httplib::DataSink& sink) {
                             const size_t n = std::min<size_t>(len, 16384);
                             if (cut && off >= served.size() / 2) return false;  // the connection drops
                             if (slow > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow));
                             sink.write(served.data() + off, n);
                             return true;
                           });
  }
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
};

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng());
  return s;
}

class Pull : public ::testing::Test {
 protected:
  void SetUp() override {
    // A loadable model as the repository's content: a synthetic tiny-e checkpoint.
    ASSERT_EQ(test::g4_command("synth --preset tiny-e --out " + (dir_.path() / "src").string(), &out_), 0) << out_;
    auto& tiny = hub_.repos["org/tiny"];
    for (const auto& e : fs::directory_iterator(dir_.path() / "src")) {
      const std::string name = e.path().filename().string();
      tiny[name] = {test::read_file(e.path()), name.find(".safetensors") != std::string::npos};
    }
    tiny["README.md"] = {"# tiny", false};
    tiny["original/consolidated.pth"] = {random_bytes(1000, 1), true};
    tiny["mmproj-tiny-f16.gguf"] = {random_bytes(1000, 2), true};
    auto& gguf = hub_.repos["org/tiny-GGUF"];
    for (const char* q : {"Q4_K_M", "Q8_0"}) gguf[std::string("tiny-") + q + ".gguf"] = {random_bytes(300000, 3), true};
    gguf["mmproj-tiny-f16.gguf"] = {random_bytes(1000, 4), true};
    cache_ = dir_.path() / "hub";
    setenv("HF_HUB_CACHE", cache_.c_str(), 1);
    setenv("HF_ENDPOINT", hub_.endpoint().c_str(), 1);
    unsetenv("HF_TOKEN");
    setenv("HF_HOME", (dir_.path() / "hf-home").c_str(), 1);  // no token file there
  }
  int pull(const std::string& args) { return test::g4_command("pull " + args, &out_); }
  fs::path repo_dir(const std::string& name) const { return cache_ / ("models--org--" + name); }
  fs::path snapshot(const std::string& name) const { return repo_dir(name) / "snapshots" / hub_.commit; }
  std::vector<std::string> incomplete(const std::string& name) const {
    std::vector<std::string> v;
    if (fs::exists(repo_dir(name) / "blobs"))
      for (const auto& e : fs::directory_iterator(repo_dir(name) / "blobs"))
        if (e.path().extension() == ".incomplete") v.push_back(e.path().string());
    return v;
  }

  test::TempDir dir_;
  FakeHub hub_;
  fs::path cache_;
  std::string out_;
};

// The default selection, the layout huggingface_hub writes, and a model loadable by name.
TEST_F(Pull, FetchesTheTextDecoderIntoTheHubCacheLayout) {
  ASSERT_EQ(pull("org/tiny"), 0) << out_;
  EXPECT_NE(out_.find(snapshot("tiny").string()), std::string::npos) << out_;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
    const fs::path p = snapshot("tiny") / f;
    ASSERT_TRUE(fs::is_symlink(p)) << f;
    EXPECT_EQ(fs::read_symlink(p).string().rfind("../../blobs/", 0), 0u) << f;
    EXPECT_EQ(test::read_file(p), hub_.repos["org/tiny"][f].bytes) << f;
  }
  for (const char* f : {"README.md", "original/consolidated.pth", "mmproj-tiny-f16.gguf"})
    EXPECT_FALSE(fs::exists(snapshot("tiny") / f)) << f;
  EXPECT_EQ(test::read_file(repo_dir("tiny") / "refs" / "main"), hub_.commit);
  ASSERT_EQ(test::g4_command("generate --model org/tiny --tokens 2,10,20 -n 4 --threads 1", &out_), 0) << out_;
  // A second pull finds every blob in place and fetches nothing.
  ASSERT_EQ(pull("org/tiny"), 0) << out_;
  EXPECT_NE(out_.find("0 fetched now"), std::string::npos) << out_;
  ASSERT_EQ(pull("org/tiny --include 'original/*'"), 0) << out_;
  EXPECT_TRUE(fs::exists(snapshot("tiny") / "original/consolidated.pth"));
  EXPECT_EQ(fs::read_symlink(snapshot("tiny") / "original/consolidated.pth").string().rfind("../../../blobs/", 0), 0u);
}

// On a terminal (a pseudo-terminal from script(1) here) a progress line shows bytes, total and
// rate; into a pipe (every other test) it stays quiet.
TEST_F(Pull, ShowsProgressOnATerminal) {
  std::string out;
  ASSERT_EQ(test::run_command("script -qec '" + test::g4_binary().string() + " pull org/tiny' /dev/null 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("model.safetensors"), std::string::npos) << out;
  EXPECT_NE(out.find(" MiB/s"), std::string::npos) << out;
  ASSERT_EQ(pull("org/tiny-GGUF"), 0) << out_;
  EXPECT_EQ(out_.find("MiB/s"), std::string::npos) << out_;
}

TEST_F(Pull, GgufRepositoriesGiveTheNamedQuantOnly) {
  ASSERT_EQ(pull("org/tiny-GGUF"), 0) << out_;  // Q4_K_M by default
  EXPECT_TRUE(fs::exists(snapshot("tiny-GGUF") / "tiny-Q4_K_M.gguf"));
  EXPECT_FALSE(fs::exists(snapshot("tiny-GGUF") / "tiny-Q8_0.gguf"));
  ASSERT_EQ(pull("org/tiny-GGUF:q8_0"), 0) << out_;
  EXPECT_NE(out_.find("tiny-Q8_0.gguf"), std::string::npos) << out_;  // the path to load
  EXPECT_FALSE(fs::exists(snapshot("tiny-GGUF") / "mmproj-tiny-f16.gguf"));
  EXPECT_NE(pull("org/tiny-GGUF:Q5_K_S"), 0);
  EXPECT_NE(out_.find("tiny-Q4_K_M.gguf"), std::string::npos) << out_;  // lists what there is
}

TEST_F(Pull, GatedMissingAndUnauthorizedAreExplained) {
  hub_.gated_repo = "org/tiny";
  EXPECT_NE(pull("org/tiny"), 0);
  EXPECT_NE(out_.find("gated"), std::string::npos) << out_;
  EXPECT_NE(out_.find("HF_TOKEN"), std::string::npos) << out_;
  setenv("HF_TOKEN", "hf_wrong", 1);
  EXPECT_NE(pull("org/tiny"), 0);
  EXPECT_NE(out_.find("403"), std::string::npos) << out_;
  EXPECT_NE(out_.find("accept its license"), std::string::npos) << out_;
  setenv("HF_TOKEN", "hf_good", 1);
  EXPECT_EQ(pull("org/tiny"), 0) << out_;
  unsetenv("HF_TOKEN");
  hub_.gated_repo.clear();
  EXPECT_NE(pull("org/nothing"), 0);
  EXPECT_NE(out_.find("not found, or private"), std::string::npos) << out_;
  EXPECT_NE(pull("org/tiny --revision v9"), 0);
  EXPECT_NE(out_.find("404"), std::string::npos) << out_;
  EXPECT_NE(out_.find("RevisionNotFound"), std::string::npos) << out_;
}

// A transfer that drops halfway is retried with a Range request from where it stopped.
TEST_F(Pull, ACutTransferResumesWithARangeRequest) {
  hub_.cut_next = 1;
  ASSERT_EQ(pull("org/tiny"), 0) << out_;
  EXPECT_NE(out_.find("resuming"), std::string::npos) << out_;
  ASSERT_EQ(hub_.ranges.size(), 1u);
  EXPECT_EQ(hub_.ranges[0].rfind("bytes=", 0), 0u);
  EXPECT_NE(hub_.ranges[0], "bytes=0-");
  EXPECT_EQ(test::read_file(snapshot("tiny") / "model.safetensors"), hub_.repos["org/tiny"]["model.safetensors"].bytes);
}

TEST_F(Pull, AWrongHashLeavesNothingBehind) {
  hub_.corrupt = true;
  EXPECT_NE(pull("org/tiny"), 0);
  EXPECT_NE(out_.find("does not match"), std::string::npos) << out_;
  EXPECT_FALSE(fs::exists(snapshot("tiny") / "model.safetensors"));
  EXPECT_TRUE(incomplete("tiny").empty());
}

// A full disk (a file-size limit here): the error names the file and what to do; nothing looks
// complete; the next pull resumes the part file.
TEST_F(Pull, AFullDiskFailsCleanlyAndTheNextPullResumes) {
  std::string out;
  const int rc = test::run_command("ulimit -f 64; " + test::g4_binary().string() + " pull org/tiny 2>&1", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("writing"), std::string::npos) << out;
  EXPECT_NE(out.find("resumes"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(snapshot("tiny") / "model.safetensors"));
  ASSERT_EQ(incomplete("tiny").size(), 1u);
  ASSERT_EQ(pull("org/tiny"), 0) << out_;
  EXPECT_EQ(hub_.ranges.size(), 1u);
  EXPECT_EQ(test::read_file(snapshot("tiny") / "model.safetensors"), hub_.repos["org/tiny"]["model.safetensors"].bytes);
}

TEST_F(Pull, APullKilledMidwayLeavesNothingThatLooksComplete) {
  hub_.slow_ms = 40;
  std::string out;
  test::run_command("timeout -s KILL 2 " + test::g4_binary().string() + " pull org/tiny >/dev/null 2>&1", &out);
  EXPECT_FALSE(fs::exists(snapshot("tiny") / "model.safetensors"));
  ASSERT_EQ(incomplete("tiny").size(), 1u);
  EXPECT_GT(fs::file_size(incomplete("tiny")[0]), 0u);
  hub_.slow_ms = 0;
  ASSERT_EQ(pull("org/tiny"), 0) << out_;
  EXPECT_FALSE(hub_.ranges.empty());
  EXPECT_EQ(test::read_file(snapshot("tiny") / "model.safetensors"), hub_.repos["org/tiny"]["model.safetensors"].bytes);
  EXPECT_TRUE(incomplete("tiny").empty());
}

}  // namespace
}  // namespace g4
