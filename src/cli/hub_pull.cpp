#include "cli/hub_pull.h"

#include <fnmatch.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/hub_http.h"
#include "platform/atomic_file.h"
#include "platform/error.h"

namespace g4::cli {
namespace fs = std::filesystem;
namespace {

bool is_hex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A file name from the hub becomes a path under the snapshot: nothing that could leave it.
void check_name(const std::string& name) {
  bool bad = name.empty() || name.front() == '/' || name.find('\\') != std::string::npos || name.find('\0') != std::string::npos;
  for (size_t b = 0; !bad && b <= name.size();) {
    const size_t e = std::min(name.find('/', b), name.size());
    const std::string part = name.substr(b, e - b);
    bad = part.empty() || part == "." || part == "..";
    b = e + 1;
  }
  if (bad) throw Error("the hub listed a file named '" + name + "', which is not a safe relative path; refused");
}

std::string percent_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

bool default_keeps(const std::string& n) {
  if (n.find('/') != std::string::npos) return false;  // subfolders: other formats, originals
  for (const char* p : {"*.json", "*.safetensors", "tokenizer.model", "*.jinja"})
    if (fnmatch(p, n.c_str(), 0) == 0) return true;
  return false;
}

// The one .gguf file `quant` names (Q4_K_M when none is named and several exist), chosen as the
// resolver chooses (hf_cache.h), so `--model org/name:TAG` later finds the file pulled.
std::vector<RepoFile> pick_gguf(const std::vector<RepoFile>& all, const std::string& quant) {
  std::vector<std::string> names;
  for (const RepoFile& f : all) names.push_back(f.name);
  const std::vector<std::string> ggufs = model_gguf_files(names);
  std::string listed;
  for (const auto& n : ggufs) listed += (listed.empty() ? "" : ", ") + n;
  if (quant.empty() && ggufs.size() == 1) return {*std::find_if(all.begin(), all.end(), [&](auto& f) { return f.name == ggufs[0]; })};
  const std::string want = quant.empty() ? "Q4_K_M" : quant;
  const std::vector<std::string> hits = gguf_files_for_tag(ggufs, want);
  if (hits.empty())
    throw Error("no .gguf file matches '" + want + "' (files: " + (listed.empty() ? "none" : listed) + "); name one as org/name:TAG");
  if (hits.size() > 1) throw Error("several .gguf files match '" + want + "' (" + listed + "); name one with a longer tag");
  return {*std::find_if(all.begin(), all.end(), [&](auto& f) { return f.name == hits[0]; })};
}

}  // namespace

std::vector<RepoFile> select_files(const std::vector<RepoFile>& all, const PullOptions& o) {
  std::vector<RepoFile> out;
  if (o.all) return all;
  if (!o.include.empty()) {
    for (const RepoFile& f : all)
      for (const std::string& p : o.include)
        if (fnmatch(p.c_str(), f.name.c_str(), 0) == 0) {
          out.push_back(f);
          break;
        }
    if (out.empty()) throw Error("no file of the repository matches --include");
    return out;
  }
  const bool has_safetensors = std::any_of(all.begin(), all.end(), [](const RepoFile& f) {
    return f.name.size() > 12 && f.name.substr(f.name.size() - 12) == ".safetensors";
  });
  if (!o.quant.empty() || !has_safetensors) {
    out = pick_gguf(all, o.quant);
    for (const RepoFile& f : all)  // a GGUF repository's configs come along (small)
      if (f.name.find('/') == std::string::npos && fnmatch("*.json", f.name.c_str(), 0) == 0) out.push_back(f);
    return out;
  }
  for (const RepoFile& f : all)
    if (default_keeps(f.name)) out.push_back(f);
  return out;
}

std::string hf_endpoint() {
  const char* e = std::getenv("HF_ENDPOINT");
  return e && *e ? e : "https://huggingface.co";
}

std::string hf_token() {
  if (const char* t = std::getenv("HF_TOKEN"); t && *t) return t;
  std::vector<fs::path> files;
  if (const char* p = std::getenv("HF_TOKEN_PATH"); p && *p) files.push_back(p);
  if (const char* h = std::getenv("HF_HOME"); h && *h) files.push_back(fs::path(h) / "token");
  if (const char* home = std::getenv("HOME"); home && *home) files.push_back(fs::path(home) / ".cache/huggingface/token");
  for (const fs::path& f : files) {
    std::ifstream in(f);
    std::string t;
    if (in && std::getline(in, t)) {
      while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
      if (!t.empty()) return t;
    }
  }
  return "";
}

namespace {

// The hub's listing of a revision: its commit and files (?blobs=true gives sizes and hashes).
std::vector<RepoFile> list_revision(HubHttp& http, const PullOptions& o, std::string& commit) {
  const std::string what = o.repo + " (revision " + o.revision + ")";
  const HubReply r = http.get("/api/models/" + o.repo + "/revision/" + percent_encode(o.revision) + "?blobs=true");
  if (r.status != 200) throw Error("" + hub_error_message(r, what, http.endpoint(), http.has_token()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.body);
  } catch (const nlohmann::json::exception& e) {
    throw Error("the hub's listing of " + what + " is not JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string() || !is_hex(j["sha"].get<std::string>()) ||
      !j.contains("siblings") || !j["siblings"].is_array())
    throw Error("the hub's listing of " + what + " lacks a commit 'sha' or a 'siblings' array");
  commit = j["sha"].get<std::string>();
  std::vector<RepoFile> files;
  for (const auto& s : j["siblings"]) {
    RepoFile f;
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string())
      throw Error("the hub's listing of " + what + " has an entry without 'rfilename'");
    f.name = s["rfilename"].get<std::string>();
    check_name(f.name);
    const auto lfs = s.find("lfs");
    f.lfs = lfs != s.end() && lfs->is_object();
    const nlohmann::json& src = f.lfs ? *lfs : s;
    const char* id = f.lfs ? "sha256" : "blobId";
    if (!src.contains("size") || !src["size"].is_number_unsigned() || !src.contains(id) || !src[id].is_string() ||
        !is_hex(src[id].get<std::string>()))
      throw Error("the hub's listing of " + what + " gives no size or " + id + " for " + f.name);
    f.size = src["size"].get<uint64_t>();
    f.blob = src[id].get<std::string>();
    files.push_back(f);
  }
  return files;
}

// sha256 of the file (LFS), or its git blob id: sha1 of "blob <size>\0" + the bytes.
std::string file_hash(const fs::path& p, bool lfs, uint64_t size) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, lfs ? EVP_sha256() : EVP_sha1(), nullptr);
  if (!lfs) {
    const std::string head = "blob " + std::to_string(size) + std::string(1, '\0');
    EVP_DigestUpdate(ctx, head.data(), head.size());
  }
  std::ifstream in(p, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx, buf.data(), size_t(in.gcount()));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, md, &n);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  char b[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
}

// A live line per file on a terminal: bytes, total and the rate since this run started it.
class Progress {
 public:
  Progress(bool live, const std::string& name, uint64_t total, uint64_t had)
      : live_(live), name_(name), total_(total), had_(had) {}
  void operator()(uint64_t done, uint64_t) {
    const auto now = Clock::now();
    if (!live_ || (now - last_ < std::chrono::milliseconds(100) && done < total_)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\r[g4] %-40s %9.1f / %.1f MiB  %7.1f MiB/s", name_.c_str(), double(done) / 1048576.0,
                 double(total_) / 1048576.0, s > 0 && done > had_ ? double(done - had_) / 1048576.0 / s : 0.0);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool live_;
  std::string name_;
  uint64_t total_, had_;
  Clock::time_point start_ = Clock::now(), last_{};
};

// The blob in place, fetched (resuming, up to 3 tries on a cut transfer) and checked; returns
// the bytes fetched now.
uint64_t fetch_blob(HubHttp& http, const PullOptions& o, const std::string& commit, const RepoFile& f, const fs::path& blob) {
  const fs::path part = blob.string() + ".incomplete";
  const std::string path = "/" + o.repo + "/resolve/" + commit + "/" + percent_encode(f.name);
  std::error_code ec;
  const uint64_t had = fs::exists(part, ec) ? fs::file_size(part, ec) : 0;
  Progress progress(o.progress, f.name, f.size, had);
  for (int attempt = 1;; ++attempt) {
    try {
      const HubReply r = http.download(path, part, f.size, std::ref(progress));
      if (r.status != 200 && r.status != 206)
        throw Error("" + hub_error_message(r, o.repo + "/" + f.name, http.endpoint(), http.has_token()));
      break;
    } catch (const TransferCut& e) {
      if (attempt == 3) throw;
      std::fprintf(stderr, "%s[g4] %s; resuming\n", o.progress ? "\n" : "", e.what());
    }
  }
  if (o.progress) std::fprintf(stderr, "\n");
  const uint64_t got = fs::file_size(part, ec);
  const std::string hash = got == f.size ? file_hash(part, f.lfs, f.size) : "";
  if (got != f.size || hash != f.blob) {
    fs::remove(part, ec);
    throw Error("" + o.repo + "/" + f.name + ": " +
                (got != f.size ? std::to_string(got) + " bytes arrived, the hub lists " + std::to_string(f.size)
                               : std::string(f.lfs ? "sha256 " : "git blob id ") + hash + " does not match the hub's " + f.blob) +
                "; the download was removed");
  }
  fs::rename(part, blob);
  return f.size - std::min(had, f.size);
}

// snapshots/<commit>/<name> -> ../../blobs/<blob> (one more ../ per folder in name), replaced
// atomically when it exists.
void link_into_snapshot(const fs::path& snapshot, const RepoFile& f) {
  const fs::path link = snapshot / f.name;
  fs::create_directories(link.parent_path());
  std::string target = "../../blobs/" + f.blob;
  for (char c : f.name)
    if (c == '/') target = "../" + target;
  const fs::path tmp = link.string() + ".g4link";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp);
  fs::rename(tmp, link);
}

}  // namespace

PullResult hf_pull(const PullOptions& o) {
  HubHttp http(o.endpoint, o.token);
  PullResult res;
  const std::vector<RepoFile> files = select_files(list_revision(http, o, res.commit), o);
  const std::string org = o.repo.substr(0, o.repo.find('/')), name = o.repo.substr(o.repo.find('/') + 1);
  const fs::path dir = o.root.path / ("models--" + org + "--" + name);
  fs::create_directories(dir / "blobs");
  res.snapshot = dir / "snapshots" / res.commit;
  fs::create_directories(res.snapshot);
  for (const RepoFile& f : files) {
    const fs::path blob = dir / "blobs" / f.blob;
    std::error_code ec;
    if (!(fs::is_regular_file(blob, ec) && fs::file_size(blob, ec) == f.size)) {
      res.bytes_fetched += fetch_blob(http, o, res.commit, f, blob);
      ++res.fetched;
    }
    link_into_snapshot(res.snapshot, f);
    ++res.files;
    if (!model_gguf_files({f.name}).empty()) res.model_path = res.snapshot / f.name;
  }
  if (res.model_path.empty()) res.model_path = res.snapshot;
  if (o.revision != res.commit) {
    fs::create_directories(dir / "refs");
    write_file_atomically(dir / "refs" / o.revision, res.commit);
  }
  return res;
}

}  // namespace g4::cli
