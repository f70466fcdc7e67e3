// Models by name: "org/name[:revision-or-quant]" resolved to files in the local Hugging Face hub
// cache, laid out as huggingface_hub writes it:
//   <root>/models--org--name/refs/<revision>         a file holding a commit hash
//   <root>/models--org--name/snapshots/<commit>/...  the repository's files, usually relative
//                                                    symlinks to ../../blobs/<sha>
// Only the cache is read; nothing is downloaded. Every failure throws g4::Error naming the cache
// root (and how it was chosen), the repository folder, the revision or the file that is wrong.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace g4 {

// Where the cache is and which setting chose it, in huggingface_hub's order: HF_HUB_CACHE,
// HUGGINGFACE_HUB_CACHE (its older name), $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
// $HOME/.cache/huggingface/hub.
struct HfCacheRoot {
  std::filesystem::path path;
  std::string chosen_by;  // e.g. "HF_HUB_CACHE", "HF_HOME", "HOME"
};
HfCacheRoot hf_cache_root();

// "owner/name" or "owner/name:x" split into repo and x; nullopt when the string does not have
// that exact form (one '/', no leading '/' or '.', hub-legal characters in owner and name).
struct HfRepoSpec {
  std::string repo;    // owner/name
  std::string suffix;  // x, or empty
};
std::optional<HfRepoSpec> parse_hf_repo_spec(const std::string& spec);

struct HfResolved {
  std::string spec;      // as given
  std::string repo;      // owner/name
  std::string revision;  // the ref or commit asked for ("main" by default)
  std::string commit;
  std::string quant;     // the tag that picked a .gguf file, or empty
  std::filesystem::path snapshot;
  std::filesystem::path path;  // what to load: the snapshot directory or one .gguf file in it
  HfCacheRoot root;

  // "org/name:Q4_K_M -> PATH (revision main, commit abc..., HF cache ROOT from HF_HUB_CACHE)"
  std::string describe() const;
};

// Of `files` (paths in a repository), the .gguf files that can be the text model: mmproj-*
// (vision projectors) never are. The resolver and `g4 pull` choose among these.
std::vector<std::string> model_gguf_files(const std::vector<std::string>& files);
// The files of `ggufs` a quant tag picks, case-insensitively, as llama-server -hf does: those whose
// name ends in the tag after '-', '.' or '_' ("...-Q4_K_M.gguf" for "q4_k_m"); failing that, those
// containing it ("UD-Q4_K_XL"). More than one is ambiguous (Q4_K against Q4_K_M and Q4_K_S).
std::vector<std::string> gguf_files_for_tag(const std::vector<std::string>& ggufs, const std::string& tag);

// Resolves a repo spec in `root`. The suffix after ':' is a revision when refs/<suffix> exists or
// it is a 40-hex commit; otherwise it is a quant tag, matched case-insensitively against the
// .gguf files of the default revision's snapshot (mmproj-* files never count as the model).
HfResolved resolve_hf_model(const HfRepoSpec& spec, const HfCacheRoot& root);

// A --model argument: nullopt when it names something on disk or is not of the repo-id form
// (the caller loads it as a path, as before); otherwise the cache resolution from hf_cache_root().
std::optional<HfResolved> resolve_model_name(const std::string& arg);

}  // namespace g4
