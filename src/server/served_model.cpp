#include "server/served_model.h"

#include <fstream>

#include "engine/gguf_tokenizer.h"
#include "engine/model_text.h"
#include "platform/device.h"
#include "platform/dtype.h"
#include "model/vision_gguf.h"
#include "platform/error.h"

namespace g4::server {

using nlohmann::json;

namespace {

// The image tokens: config.json's ids, or (a GGUF carries none) the tokenizer's pieces; images are
// accepted only with a tower and all three ids inside the model's vocabulary.
void resolve_images(ServedModel& m) {
  std::string missing;
  m.image_ids = resolve_image_token_ids(m.model->config, &m.tokenizer->vocab(), missing);
  if (!m.vision) {
    m.images_refused = "the served model has no vision tower (no vision_config in config.json; for a GGUF pass --mmproj)";
    return;
  }
  if (!missing.empty()) {
    m.images_refused = "the image token " + missing + " has no id in config.json or the tokenizer";
    return;
  }
  if (m.model->format == "gguf") infer_image_mask_rule_for_gguf(m.model->config);
  if (!m.model->config.image_token_id) m.model->config.image_token_id = m.image_ids.image;  // the engine's check reads it
  if (!m.model->config.boi_token_id) m.model->config.boi_token_id = m.image_ids.begin;
  if (!m.model->config.eoi_token_id) m.model->config.eoi_token_id = m.image_ids.end;
  if (!m.missing_template_tokens.empty()) m.images_refused = "the tokenizer lacks the chat template's tokens";
}

}  // namespace

ServedModel ServedModel::load(const std::filesystem::path& dir, const std::filesystem::path& tokenizer_file,
                              const std::string& name, const std::filesystem::path& mmproj) {
  ServedModel m;
  m.dir = dir;
  m.id = name.empty() ? std::filesystem::absolute(dir).lexically_normal().filename().string() : name;
  if (m.id.empty()) m.id = "g4";
  m.model = load_model(dir);
  if (!tokenizer_file.empty()) {
    m.tokenizer_path = tokenizer_file;
    m.tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::from_file(tokenizer_file));
  } else if (std::filesystem::is_directory(dir) && std::filesystem::exists(dir / "tokenizer.json")) {
    m.tokenizer_path = dir / "tokenizer.json";
    m.tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::from_dir(dir));
  } else if (m.model->gguf) {
    if (auto t = tokenizer_from_gguf(*m.model->gguf)) {  // tokenizer.ggml.* metadata
      m.tokenizer_path = dir;
      m.tokenizer = std::make_unique<text::Tokenizer>(std::move(*t));
    }
  }
  if (!m.tokenizer)
    throw Error(dir.string() + ": no tokenizer.json beside the checkpoint and none in its metadata; pass --tokenizer FILE");
  const int64_t tok_vocab = m.tokenizer->vocab().size();
  const int64_t model_vocab = m.model->config.vocab_size;
  if (tok_vocab > model_vocab) {
    // Served anyway (the Gemma 3 fixture tokenizer has one added token past 262144): a prompt that
    // encodes to such an id is refused with a 400 naming it; the model can never generate one.
    std::string extra;
    for (int64_t id = model_vocab; id < tok_vocab && id < model_vocab + 4; ++id)
      extra += (extra.empty() ? "" : ", ") + std::to_string(id) + " \"" + std::string(m.tokenizer->vocab().piece(int32_t(id))) + "\"";
    m.notes.push_back("the tokenizer has " + std::to_string(tok_vocab) + " tokens but the model only " + std::to_string(model_vocab) +
                      "; prompts containing ids past the model's vocabulary (" + extra + (tok_vocab - model_vocab > 4 ? ", ..." : "") +
                      ") are refused");
  }
  if (tok_vocab < m.model->config.vocab_size)
    m.notes.push_back("the tokenizer has " + std::to_string(tok_vocab) + " tokens, the model " +
                      std::to_string(m.model->config.vocab_size) + "; ids past the tokenizer decode to nothing");

  m.stops = model_stop_tokens(*m.model, &m.tokenizer->vocab());
  for (const auto& p : m.stops.problems) m.notes.push_back(p);
  if (m.stops.ids.empty()) m.notes.push_back("no stop token resolved: generation ends only at max_tokens or a stop string");
  m.missing_template_tokens = text::missing_template_tokens(m.tokenizer->vocab());
  if (!m.missing_template_tokens.empty()) {
    std::string list;
    for (const auto& t : m.missing_template_tokens) list += (list.empty() ? "" : " ") + t;
    m.notes.push_back("the tokenizer lacks the Gemma 4 chat template tokens " + list +
                      " (a Gemma 3 tokenizer?): chat prompts encode them as plain text and \"<turn|>\" is added as a "
                      "stop string; output quality from a real model would suffer");
  }
  if (!m.tokenizer->bos_id()) throw Error(m.tokenizer_path.string() + ": no bos token named; the chat template needs it");

  std::ifstream cf(dir / "config.json");
  json cfg = json::parse(cf, nullptr, false);
  m.synthetic = cfg.is_object() && cfg.contains("g4_synth");
  if (m.synthetic) m.notes.push_back("random weights made by g4 synth: output is noise by design (the degeneracy guard flags it)");
  m.policy = resolve_policy(host_cpu(), checkpoint_format(m.model->weights.dtype));
  if (!mmproj.empty())
    m.vision = load_vision_mmproj(mmproj, m.model->config.hidden_size);
  else if (std::filesystem::is_directory(dir))
    m.vision = load_vision_model(dir);
  resolve_images(m);
  return m;
}

json ServedModel::describe() const {
  const ModelConfig& c = model->config;
  json d = {{"path", dir.string()},
            {"synthetic", synthetic},
            {"model_type", c.model_type},
            {"vocab_size", c.vocab_size},
            {"layers", c.num_hidden_layers},
            {"hidden_size", c.hidden_size},
            {"max_position_embeddings", c.max_position_embeddings},
            {"weights_dtype", std::string(dtype_name(model->weights.layers[0].q_proj->dtype))},
            {"dtype_policy", gpu_device.empty() ? policy_to_json(policy) : gpu_policy},
            {"device", gpu_device.empty() ? host_cpu().name : gpu_device},
            {"forward", forward},
            {"tokenizer", {{"path", tokenizer_path.string()}, {"size", tokenizer->vocab().size()}}},
            {"stop_token_ids", stops.ids},
            {"stop_token_problems", stops.problems},
            {"missing_template_tokens", missing_template_tokens},
            {"chat_template", missing_template_tokens.empty() ? "gemma4" : "gemma4 (degraded: control tokens as plain text)"},
            {"notes", notes}};
  if (vision) {
    const VisionConfig& v = vision->config;
    d["vision"] = {{"source", vision->format == "gguf" ? vision->path.string() : "config.json vision_config"},
                   {"format", vision->format},
                   {"layers", v.num_hidden_layers},
                   {"hidden_size", v.hidden_size},
                   {"patch_size", v.patch_size},
                   {"pooling_kernel_size", v.pooling_kernel_size},
                   {"default_image_tokens", v.default_image_budget()},
                   {"image_token_ids", {{"image", image_ids.image}, {"begin", image_ids.begin}, {"end", image_ids.end}}},
                   {"accepts_images", images_refused.empty()}};
  } else {
    d["vision"] = nullptr;
  }
  if (!images_refused.empty()) d["images_refused"] = images_refused;
  return d;
}

std::vector<int32_t> encode_chat_prompt(const ServedModel& m, const json& messages, const json& tools, bool enable_thinking) {
  const text::Tokenizer& tok = *m.tokenizer;
  text::ChatOptions o;
  o.enable_thinking = enable_thinking;
  if (m.missing_template_tokens.empty()) return text::encode_chat(tok, messages, tools, o);
  // Degraded: same template text, markers tokenized as characters; still exactly one bos at 0.
  const int32_t bos = *tok.bos_id();
  o.bos_token = std::string(tok.vocab().piece(bos));
  std::vector<int32_t> ids = tok.encode(text::render_chat(messages, tools, o));
  if (ids.empty() || ids[0] != bos) ids.insert(ids.begin(), bos);
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i] == bos)
      throw Error("chat prompt has a second bos token at position " + std::to_string(i) + " (\"" + o.bos_token +
                  "\" typed in a message?)");
  return ids;
}

}  // namespace g4::server
