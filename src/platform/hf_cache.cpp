#include "platform/hf_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "platform/error.h"

namespace g4 {
namespace fs = std::filesystem;
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// huggingface_hub expands a leading "~" in these variables; so does g4.
fs::path expand_user(const std::string& p) {
  if (p == "~" || p.rfind("~/", 0) == 0)
    if (const char* home = env("HOME")) return fs::path(home) / p.substr(std::min<size_t>(p.size(), 2));
  return p;
}

std::string lowercase(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool hub_name(const std::string& s) {
  if (s.empty() || s.size() > 96 || s[0] == '.' || s[0] == '-' || s.find("..") != std::string::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// Revisions ("main", "v1.0", "pr/1") and quant tags ("Q4_K_M", "UD-Q4_K_XL"); never a path that
// climbs out of refs/.
bool suffix_ok(const std::string& s) {
  if (s.empty() || s[0] == '/' || s.find("..") != std::string::npos) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

bool is_commit_hash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// A directory entry, followed or not: a dangling symlink is present.
bool present(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() != fs::file_type::not_found && !ec;
}

std::string where(const HfCacheRoot& r) {
  if (r.chosen_by == "HOME")
    return "Hugging Face cache " + r.path.string() + " (the default; HF_HUB_CACHE and HF_HOME are not set)";
  return "Hugging Face cache " + r.path.string() + " (from " + r.chosen_by + ")";
}

std::string comma_list(const std::vector<std::string>& v) {
  if (v.empty()) return "none";
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Regular files (or links) under dir, relative to it, sorted.
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (!it->is_directory()) out.push_back(it->path().lexically_relative(dir).generic_string());  // relative() resolves links
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> dirs_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string download_hint(const std::string& repo) {
  return "g4 pull does not exist yet: download it with `huggingface-cli download " + repo +
         "` (or `hf download " + repo + "`), which writes this same cache";
}

[[noreturn]] void missing_repo(const std::string& spec, const std::string& repo, const HfCacheRoot& root,
                               const std::string& folder) {
  std::string msg = spec + ": no such file or directory here, and the " + where(root);
  if (!fs::is_directory(root.path)) {
    msg += " does not exist";
  } else {
    msg += " has no " + folder;
    for (const auto& d : dirs_in(root.path))  // the hub is case-insensitive, the cache folder is not
      if (lowercase(d) == lowercase(folder) && d != folder) msg += " (it has " + d + ")";
  }
  throw Error(msg + ". " + download_hint(repo));
}

std::string read_ref(const fs::path& repo_dir, const std::string& revision, const std::string& spec) {
  const fs::path ref = repo_dir / "refs" / revision;
  if (!fs::is_regular_file(ref)) {
    throw Error(spec + ": revision '" + revision + "' is not in " + repo_dir.string() + " (refs present: " +
                comma_list(files_under(repo_dir / "refs")) + "; a full 40-hex commit also works)");
  }
  std::ifstream f(ref, std::ios::binary);
  std::string commit(std::istreambuf_iterator<char>(f), {});
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
  if (!is_commit_hash(commit)) throw Error(spec + ": " + ref.string() + " does not hold a commit hash");
  return commit;
}

std::vector<std::string> model_ggufs(const fs::path& snapshot) { return model_gguf_files(files_under(snapshot)); }

// One file for the tag (gguf_files_for_tag), or an error listing what there is.
std::string pick_gguf(const std::vector<std::string>& ggufs, const HfResolved& r, const std::string& suffix) {
  const std::string at = r.repo + " (snapshot " + r.snapshot.string() + ")";
  if (r.quant.empty()) {
    if (ggufs.size() == 1) return ggufs[0];
    throw Error(r.spec + ": " + std::to_string(ggufs.size()) + " .gguf files in " + at + "; pick one with " + r.repo +
                ":TAG (a quant tag such as Q4_K_M, matched against the file names): " + comma_list(ggufs));
  }
  const std::vector<std::string> hits = gguf_files_for_tag(ggufs, r.quant);
  if (hits.size() == 1) return hits[0];
  if (hits.size() > 1)
    throw Error(r.spec + ": quant tag '" + r.quant + "' matches " + std::to_string(hits.size()) + " .gguf files in " +
                at + ": " + comma_list(hits) + "; give a longer tag");
  if (ggufs.empty())
    throw Error(r.spec + ": '" + suffix + "' is no revision of " + r.repo + " (refs present: " +
                comma_list(files_under(r.snapshot.parent_path().parent_path() / "refs")) +
                ") and, as a quant tag, finds no .gguf file in snapshot " + r.snapshot.string());
  throw Error(r.spec + ": no .gguf file in " + at + " matches the quant tag '" + r.quant + "' (files: " + comma_list(ggufs) +
              "; mmproj files are not models)");
}

// An entry whose blob is gone: an interrupted download (huggingface_hub writes blobs/<sha>.incomplete
// first) or a blob deleted by hand. Names the file and the blob.
void check_link(const HfResolved& r, const std::string& rel) {
  const fs::path p = r.snapshot / rel;
  std::error_code ec;
  if (!fs::is_symlink(p, ec) || fs::exists(p, ec)) return;
  const fs::path blob = (p.parent_path() / fs::read_symlink(p, ec)).lexically_normal();
  const bool partial = fs::exists(blob.string() + ".incomplete", ec);
  throw Error(r.spec + ": " + p.string() + " links to the missing blob " + blob.string() +
              (partial ? " (" + blob.filename().string() + ".incomplete is there: the download was interrupted)"
                       : " (an interrupted download or a deleted blob)") +
              "; finish it with `huggingface-cli download " + r.repo + "`");
}

// Snapshot directory repos load as a whole, so every file must be there; a GGUF pick needs its file.
void choose_files(HfResolved& r, const std::string& suffix) {
  const auto ggufs = model_ggufs(r.snapshot);
  bool safetensors = false;
  for (const auto& f : files_under(r.snapshot)) safetensors |= fs::path(f).extension() == ".safetensors";
  if (r.quant.empty() && present(r.snapshot / "config.json") && (safetensors || ggufs.empty())) {
    for (const auto& f : files_under(r.snapshot)) check_link(r, f);
    r.path = r.snapshot;
    return;
  }
  if (r.quant.empty() && ggufs.empty())
    throw Error(r.spec + ": snapshot " + r.snapshot.string() + " holds neither config.json nor a .gguf file (files: " +
                comma_list(files_under(r.snapshot)) + ")");
  const std::string f = pick_gguf(ggufs, r, suffix);
  check_link(r, f);
  r.path = r.snapshot / f;
}

}  // namespace

HfCacheRoot hf_cache_root() {
  if (const char* v = env("HF_HUB_CACHE")) return {expand_user(v), "HF_HUB_CACHE"};
  if (const char* v = env("HUGGINGFACE_HUB_CACHE")) return {expand_user(v), "HUGGINGFACE_HUB_CACHE"};
  if (const char* v = env("HF_HOME")) return {expand_user(v) / "hub", "HF_HOME"};
  if (const char* v = env("XDG_CACHE_HOME")) return {expand_user(v) / "huggingface" / "hub", "XDG_CACHE_HOME"};
  if (const char* v = env("HOME")) return {fs::path(v) / ".cache" / "huggingface" / "hub", "HOME"};
  throw Error("cannot locate the Hugging Face cache: none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or HOME is set");
}

std::vector<std::string> model_gguf_files(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) {
    const std::string name = lowercase(fs::path(f).filename().string());
    if (fs::path(name).extension() == ".gguf" && name.find("mmproj") == std::string::npos) out.push_back(f);
  }
  return out;
}

std::vector<std::string> gguf_files_for_tag(const std::vector<std::string>& ggufs, const std::string& quant) {
  const std::string tag = lowercase(quant);
  std::vector<std::string> exact, partial;
  for (const auto& f : ggufs) {
    const std::string stem = lowercase(fs::path(f).stem().string());
    const size_t n = tag.size();
    const bool ends = stem.size() >= n && stem.compare(stem.size() - n, n, tag) == 0 &&
                      (stem.size() == n || std::string("-._").find(stem[stem.size() - n - 1]) != std::string::npos);
    if (ends) exact.push_back(f);
    else if (stem.find(tag) != std::string::npos) partial.push_back(f);
  }
  return !exact.empty() ? exact : partial;
}

std::optional<HfRepoSpec> parse_hf_repo_spec(const std::string& spec) {
  if (spec.empty() || spec[0] == '/' || spec[0] == '.') return std::nullopt;
  const size_t colon = spec.find(':');
  HfRepoSpec s{spec.substr(0, colon), colon == std::string::npos ? "" : spec.substr(colon + 1)};
  if (colon != std::string::npos && !suffix_ok(s.suffix)) return std::nullopt;
  const size_t slash = s.repo.find('/');
  if (slash == std::string::npos || !hub_name(s.repo.substr(0, slash)) || !hub_name(s.repo.substr(slash + 1)))
    return std::nullopt;
  return s;
}

HfResolved resolve_hf_model(const HfRepoSpec& spec, const HfCacheRoot& root) {
  HfResolved r;
  r.spec = spec.repo + (spec.suffix.empty() ? "" : ":" + spec.suffix);
  r.repo = spec.repo;
  r.root = root;
  const size_t slash = spec.repo.find('/');
  const std::string folder = "models--" + spec.repo.substr(0, slash) + "--" + spec.repo.substr(slash + 1);
  const fs::path repo_dir = root.path / folder;
  if (!fs::is_directory(repo_dir)) missing_repo(r.spec, r.repo, root, folder);
  r.revision = "main";
  if (!spec.suffix.empty()) {
    // A ref wins over a commit, a commit over a quant tag: "org/name:v1" is a revision when
    // refs/v1 exists, and only a GGUF repository gives the suffix a second meaning.
    if (fs::is_regular_file(repo_dir / "refs" / spec.suffix)) r.revision = spec.suffix;
    else if (is_commit_hash(spec.suffix)) r.revision = r.commit = lowercase(spec.suffix);
    else r.quant = spec.suffix;
  }
  if (r.commit.empty()) r.commit = read_ref(repo_dir, r.revision, r.spec);
  r.snapshot = repo_dir / "snapshots" / r.commit;
  if (!fs::is_directory(r.snapshot)) {
    const std::string how = r.revision == r.commit ? "commit " + r.commit : "refs/" + r.revision + " names commit " + r.commit;
    throw Error(r.spec + ": " + how + " but " + r.snapshot.string() + " does not exist (snapshots present: " +
                comma_list(dirs_in(repo_dir / "snapshots")) + "). " + download_hint(r.repo));
  }
  choose_files(r, spec.suffix);
  return r;
}

std::optional<HfResolved> resolve_model_name(const std::string& arg) {
  if (present(arg)) return std::nullopt;  // a local path always wins, even one shaped like org/name
  const auto spec = parse_hf_repo_spec(arg);
  if (!spec) return std::nullopt;
  return resolve_hf_model(*spec, hf_cache_root());
}

std::string HfResolved::describe() const {
  return spec + " -> " + path.string() + " (revision " + revision + ", commit " + commit + ", " + where(root) + ")";
}

}  // namespace g4
