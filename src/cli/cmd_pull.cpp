// g4 pull: downloads a model from the Hugging Face hub into the local hub cache (hub_pull.h).
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "platform/error.h"
#include "platform/hf_cache.h"
#if G4_HAVE_PULL
#include "cli/hub_pull.h"
#endif

namespace g4::cli {
namespace {

const std::string kUsage =
    "usage: g4 pull ORG/NAME[:QUANT] [--revision REV] [--include PATTERNS] [--all]\n\n"
    "Downloads a model repository from the Hugging Face hub into the local hub cache (the one\n"
    "`--model ORG/NAME` reads: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub),\n"
    "laid out as huggingface_hub lays it out, then prints the path to load.\n"
    "By default it fetches what the text decoder needs: the top-level configs, tokenizer and chat\n"
    "template files and the safetensors weights; from a GGUF repository the .gguf file QUANT names\n"
    "(default Q4_K_M) and never mmproj-* files.\n\n"
    "  --revision REV       branch, tag or commit (default main); refs/REV records the commit\n"
    "  --include PATTERNS   comma-separated globs on the file names instead of the default\n"
    "                       selection (e.g. '*.json,model-0000[1-2]*')\n"
    "  --all                every file of the repository\n\n"
    "Every file is fetched to blobs/<sha>.incomplete, resumed with a Range request if one is\n"
    "there (a cut transfer is retried twice), checked against the hub's size and sha256 (LFS) or\n"
    "git blob id, and only then renamed into place and linked: an interrupted pull leaves nothing\n"
    "that looks complete, and running it again resumes. A progress line shows on a terminal.\n"
    "HF_TOKEN (or the token file huggingface-cli login writes) authenticates; HF_ENDPOINT\n"
    "replaces https://huggingface.co. A gated model answers with what to do: accept its license\n"
    "on the hub, then set a token of that account.\n";

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--revision", "--include"}, {"--all"}, 1);
  if (a.positional().size() != 1) throw Error("give one repository, ORG/NAME[:QUANT] (see g4 pull --help)");
  const auto spec = parse_hf_repo_spec(a.positional()[0]);
  if (!spec) throw Error("'" + a.positional()[0] + "' is not a repository id of the form ORG/NAME[:QUANT]");
#if G4_HAVE_PULL
  PullOptions o;
  o.repo = spec->repo;
  o.quant = spec->suffix;
  o.revision = a.get_or("--revision", "main");
  if (auto inc = a.get("--include")) {
    size_t b = 0;
    while (b <= inc->size()) {
      const size_t e = std::min(inc->find(',', b), inc->size());
      if (e > b) o.include.push_back(inc->substr(b, e - b));
      b = e + 1;
    }
    if (o.include.empty()) throw Error("--include: no pattern given");
  }
  o.all = a.has("--all");
  if (o.all && (!o.include.empty() || !o.quant.empty())) throw Error("--all fetches every file: give no --include or :QUANT with it");
  o.root = hf_cache_root();
  o.endpoint = hf_endpoint();
  o.token = hf_token();
  o.progress = isatty(2) != 0;
  // A file-size limit (ulimit -f) must fail a write with EFBIG, which the pull reports, not kill.
  signal(SIGXFSZ, SIG_IGN);
  std::fprintf(stderr, "[g4] pulling %s (revision %s) from %s into %s (from %s)\n", o.repo.c_str(), o.revision.c_str(),
               o.endpoint.c_str(), o.root.path.c_str(), o.root.chosen_by.c_str());
  const PullResult r = hf_pull(o);
  std::fprintf(stderr, "[g4] %s: commit %s, %d files (%d fetched now, %.1f MiB)\n", o.repo.c_str(), r.commit.c_str(), r.files,
               r.fetched, double(r.bytes_fetched) / 1048576.0);
  std::printf("%s\n", r.model_path.c_str());
  return 0;
#else
  throw Error("this g4 was built without libcurl and OpenSSL (libcurl4-openssl-dev, libssl-dev): g4 pull is unavailable");
#endif
}

const Registration reg{"pull", "download a model from the Hugging Face hub into the local hub cache", kUsage, run};

}  // namespace
}  // namespace g4::cli
