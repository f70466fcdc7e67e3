// g4 pull: a repository's files from the Hugging Face hub into the local hub cache, laid out as
// huggingface_hub lays it out (blobs/<sha>, snapshots/<commit>/<file> -> ../../blobs/<sha>,
// refs/<revision>), so that `--model org/name` and every other tool reading the cache find them.
// Each file is fetched to blobs/<sha>.incomplete (resumed with a Range request when one is
// there), checked against the hub's size and hash (sha256 for LFS files, the git blob id
// otherwise), renamed into place and only then linked: an interrupted pull never leaves a file
// that looks complete.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "platform/hf_cache.h"

namespace g4::cli {

struct PullOptions {
  std::string repo;              // owner/name
  std::string revision = "main";
  std::string quant;             // a GGUF file tag (Q4_K_M): picks that .gguf file
  std::vector<std::string> include;  // glob patterns on the file names; empty: the default selection
  bool all = false;              // every file of the repository
  HfCacheRoot root;
  std::string endpoint, token;
  bool progress = false;         // a live progress line (stderr is a terminal)
};

struct RepoFile {
  std::string name;
  uint64_t size = 0;
  std::string blob;  // sha256 (LFS) or git blob id: the file's name under blobs/
  bool lfs = false;
};

// The files a pull fetches. Default: the top-level configs, tokenizer and chat template files and
// the safetensors weights; for a GGUF repository the one .gguf file `quant` names (Q4_K_M when
// none is named and one exists), never mmproj-* files (the vision projector, not the text
// decoder). Throws listing the candidates when the choice is ambiguous or empty.
std::vector<RepoFile> select_files(const std::vector<RepoFile>& all, const PullOptions& o);

struct PullResult {
  std::string commit;
  std::filesystem::path snapshot;
  std::filesystem::path model_path;  // the snapshot, or the one .gguf file pulled
  int files = 0, fetched = 0;        // selected, and of those downloaded now (the rest were there)
  uint64_t bytes_fetched = 0;
};

PullResult hf_pull(const PullOptions& o);

// The token huggingface_hub would use: $HF_TOKEN, else the file $HF_TOKEN_PATH, $HF_HOME/token or
// ~/.cache/huggingface/token; "" when none.
std::string hf_token();
std::string hf_endpoint();  // $HF_ENDPOINT, default https://huggingface.co

}  // namespace g4::cli
