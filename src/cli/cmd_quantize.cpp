// g4 quantize: any checkpoint g4 loads -> a gemma4 GGUF with weight matrices in one type (a
// drafter -> a gemma4-assistant GGUF).
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "engine/gguf_tokenizer.h"
#include "model/assistant_gguf_writer.h"
#include "model/gguf_writer.h"
#include "model/model.h"
#include "platform/error.h"
#include "text/tokenizer_json.h"

namespace g4::cli {
namespace {

const std::string kUsage = std::string(
    "usage: g4 quantize IN OUT --type q8_0|q4_0|q4_1|q4_k|q5_k|q6_k|q4_k_m|f16|bf16|f32\n\n"
    "Reads IN (a MODEL, below: a Hugging Face directory, a .gguf file or a repo id), validates it,\n"
    "and writes OUT as a GGUF (llama.cpp's gemma4 layout) with every 2-D/3-D weight matrix stored\n"
    "as --type. K-quant\n"
    "matrices whose rows are not a multiple of 256 fall back to Q8_0; rows that are not whole\n"
    "blocks at all, norms, scalars and 1-D tensors stay F32. q4_k_m is llama.cpp's Q4_K_M mix:\n"
    "Q6_K for the output head (the embedding table when it is tied) and for the attn_v and\n"
    "ffn_down matrices of the first and last eighth of their layers and every third between,\n"
    "Q4_K for the rest. The tokenizer is carried over\n"
    "(IN's GGUF metadata, or IN/tokenizer.json + tokenizer_config.json). Written to OUT.tmp and\n"
    "renamed, so an interrupted run leaves nothing that loads.\n"
    "An assistant drafter (IN's config.json says gemma4_assistant, or IN is a gemma4-assistant GGUF)\n"
    "is written in llama.cpp's gemma4-assistant layout, for --draft-model; its centroid head's\n"
    "tables are kept (llama.cpp's converter drops them). q4_k_m is for models only.") +
    kModelHelp;

GgufExportReport write_drafter(const std::filesystem::path& in, DType type, bool q4_k_m, const std::filesystem::path& out) {
  if (q4_k_m) throw Error("--type q4_k_m: llama.cpp's mix is for models; give a drafter one type (q8_0, q4_k, ...)");
  return write_assistant_gguf(*open_assistant(in), type, out);
}

GgufExportReport write_model(const std::filesystem::path& in, DType type, bool q4_k_m, const std::filesystem::path& out) {
  auto model = load_model(in);
  return write_model_gguf(*model, type, out, [&](GgufWriter& w) {
    if (model->gguf) {
      for (const auto& [key, value] : model->gguf->metadata())
        if (key.rfind("tokenizer.", 0) == 0) w.set_value(key, value);
    } else if (std::filesystem::exists(in / "tokenizer.json")) {
      add_tokenizer_metadata(w, text::read_tokenizer_json(in / "tokenizer.json", in / "tokenizer_config.json"));
    } else {
      std::fprintf(stderr, "note: %s has no tokenizer.json; the GGUF carries no tokenizer\n", in.string().c_str());
    }
  }, q4_k_m ? QuantMix::Q4_K_M : QuantMix::Uniform);
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--type"}, {}, 2);
  if (a.positional().size() != 2) throw Error("give IN and OUT (see g4 quantize --help)");
  const std::filesystem::path in = model_arg(a.positional()[0]).path, out = a.positional()[1];
  const std::string tname = a.require("--type");
  const bool q4_k_m = tname == "q4_k_m" || tname == "Q4_K_M";
  const auto type = q4_k_m ? std::optional<DType>(DType::Q4_K) : dtype_from_any_name(tname);
  if (!type)
    throw Error("--type '" + tname + "': expected q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q4_k_m, f16, bf16 or f32");
  const auto rep = is_assistant_checkpoint(in) ? write_drafter(in, *type, q4_k_m, out) : write_model(in, *type, q4_k_m, out);
  std::printf("wrote %s: %.2f MiB of tensor data (", out.string().c_str(), double(rep.bytes) / double(1 << 20));
  bool first = true;
  for (const auto& [dt, n] : rep.tensors_by_dtype) {
    std::printf("%s%llu %s", first ? "" : ", ", (unsigned long long)n, dt.c_str());
    first = false;
  }
  std::printf(" tensors)\n");
  for (const auto& n : rep.notes) std::printf("note       %s\n", n.c_str());
  return 0;
}

const Registration reg{"quantize",
                       "write a checkpoint as GGUF with weights in q8_0/q4_0/q4_1/q4_k/q5_k/q6_k/q4_k_m/f16/bf16/f32",
                       kUsage, run};

}  // namespace
}  // namespace g4::cli
