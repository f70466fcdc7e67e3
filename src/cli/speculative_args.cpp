#include "cli/speculative_args.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/model_arg.h"
#include "engine/assistant_drafter.h"
#include "platform/error.h"

namespace g4::cli {

const char* const kSpeculativeHelp =
    "  --speculative M      off (default) | ngram: drafts looked up in the sequence's own prompt and\n"
    "                       output | draft: drafts from Gemma 4's assistant model (--draft-model);\n"
    "                       drafts are verified in one batched step and the output is exactly the\n"
    "                       same as without (greedy or seeded), only faster when they are accepted\n"
    "  --draft-k N          drafts per verify step at most (default 4, 1..16; adapted per sequence)\n"
    "  --draft-model PATH   the assistant drafter: a *-it-assistant checkpoint directory or repo id, or\n"
    "                       llama.cpp's gemma4-assistant .gguf; checked against the model's geometry\n"
    "                       at load; implies --speculative draft\n"
    "  --draft-p-min P      the drafter stops at a step whose top token is below P (default 0.5)\n";

std::set<std::string> with_speculative_flags(std::set<std::string> value_flags) {
  value_flags.insert({"--speculative", "--draft-k", "--draft-model", "--draft-p-min"});
  return value_flags;
}

SpeculativeSetup speculative_setup(const Args& a, const Model& target) {
  SpeculativeSetup s;
  SpeculativeOptions& o = s.options;
  const std::string mode = a.get_or("--speculative", a.has("--draft-model") ? "draft" : "off");
  const auto m = parse_spec_mode(mode);
  if (!m) throw Error("--speculative " + mode + ": expected off, ngram or draft");
  o.mode = *m;
  const long long k = a.get_int("--draft-k", 4);
  if (k < 1 || k > 16) throw Error("--draft-k " + std::to_string(k) + ": expected 1..16");
  o.k_max = int(k);
  const double p = a.get_double("--draft-p-min", 0.5);
  if (!(p >= 0 && p <= 1)) throw Error("--draft-p-min " + std::to_string(p) + ": expected 0..1");
  o.p_min = float(p);
  const auto dir = a.get("--draft-model");
  if (o.mode == SpecMode::Draft && !dir) throw Error("--speculative draft needs --draft-model PATH (an assistant checkpoint)");
  if (dir && o.mode != SpecMode::Draft) throw Error("--draft-model is read only with --speculative draft");
  if (!dir) return s;
  auto loaded = load_assistant(model_arg(*dir).path, target);
  s.min_matmul_input = loaded->config.widest_matmul_input();
  s.assistant = std::shared_ptr<const AssistantModel>(std::move(loaded));
  o.drafter_name = s.assistant->path.string();
  std::fprintf(stderr, "[g4] drafter: %s, paired with the model\n", o.drafter_name.c_str());
  o.make_drafter = [assistant = s.assistant, &target, p_min = o.p_min](const GenerationRequest&, int) {
    return std::make_unique<AssistantDrafter>(*assistant, target, p_min);
  };
  return s;
}

nlohmann::json speculative_json(const SpeculativeOptions& o) {
  nlohmann::json j = {{"mode", spec_mode_name(o.mode)}, {"k_max", o.k_max}};
  if (!o.drafter_name.empty()) {
    j["draft_model"] = o.drafter_name;
    j["p_min"] = o.p_min;
  }
  return j;
}

}  // namespace g4::cli
