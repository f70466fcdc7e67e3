// g4 tokenize: encode text to ids, decode ids to text, or render a chat through the Gemma 4
// template, with the checkpoint's own tokenizer.json.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "engine/prompt_images.h"
#include "model/config.h"
#include "model/vision_config.h"
#include "server/image_input.h"
#include "server/image_parts.h"
#include "engine/gguf_tokenizer.h"
#include "platform/error.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace g4::cli {
namespace {

using json = nlohmann::json;

const std::string kUsage = std::string(
    "usage: g4 tokenize (--tokenizer FILE | --model MODEL) (--text TEXT | --jsonl FILE | --decode IDS | --chat FILE)\n"
    "                   [--bos] [--skip-special] [--thinking] [--no-generation-prompt]\n\n"
    "  --tokenizer FILE  a tokenizer.json (tokenizer_config.json beside it is read when present), or a .gguf\n"
    "  --model MODEL     a checkpoint directory holding tokenizer.json, a .gguf file or a repo id\n"
    "  --text TEXT       prints the ids as a JSON array\n"
    "  --jsonl FILE      one JSON object with a \"text\" field per line -> one JSON array of ids per line\n"
    "  --bos             prepend the bos token (off by default, as Hugging Face encodes)\n"
    "  --decode 1,2,3    prints the decoded text (--skip-special drops control tokens)\n"
    "  --chat FILE.json  an OpenAI-style messages array (or {\"messages\": [...], \"tools\": [...]}),\n"
    "                    rendered with the Gemma 4 template; prints {\"text\": ..., \"ids\": [...]}\n"
    "  --thinking        --chat with thinking enabled (<|think|> in the system turn)\n"
    "  --image-tokens N  --chat with image parts (data: URLs; needs --model with a vision tower): each\n"
    "                    <|image|> is expanded to <|image>, its soft tokens, <image|>, at the part's\n"
    "                    detail or N (default: the tower's); the output adds each image's span") +
    kModelHelp;

text::Tokenizer load(const Args& a) {
  if (a.has("--tokenizer") == a.has("--model")) throw Error("give exactly one of --tokenizer FILE or --model MODEL");
  const std::string src = a.has("--tokenizer") ? a.require("--tokenizer") : model_arg(a.require("--model")).path.string();
  if (looks_like_gguf(src)) {  // a GGUF's tokenizer.ggml.* metadata
    auto tok = tokenizer_from_gguf(*GgufFile::open(src));
    if (!tok) throw Error(src + ": this GGUF carries no tokenizer (no tokenizer.ggml.tokens)");
    return std::move(*tok);
  }
  if (a.has("--tokenizer")) return text::Tokenizer::from_file(a.require("--tokenizer"));
  return text::Tokenizer::from_dir(src);
}

json read_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  try {
    return json::parse(f);
  } catch (const json::parse_error& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
}

// The chat's image parts expanded in `ids` (as the server expands them); their spans as JSON.
json expand_chat_images(const Args& a, const json& messages, const text::Vocabulary& vocab, std::vector<int32_t>& ids) {
  std::vector<server::ImagePart> parts;
  for (size_t k = 0; messages.is_array() && k < messages.size(); ++k) {
    const json* content = messages[k].is_object() && messages[k].contains("content") ? &messages[k]["content"] : nullptr;
    for (size_t j = 0; content && content->is_array() && j < content->size(); ++j) {
      const json& part = (*content)[j];
      if (!part.is_object() || part.value("type", "") != "image_url") continue;
      auto p = server::read_image_url_part(part, "messages[" + std::to_string(k) + "].content[" + std::to_string(j) + "]");
      if (auto* e = std::get_if<server::ApiError>(&p)) throw Error(e->message);
      parts.push_back(std::get<server::ImagePart>(p));
    }
  }
  if (parts.empty()) return nullptr;
  if (!a.has("--model")) throw Error("--chat with image parts needs --model (its vision tower sets each image's tokens)");
  const std::filesystem::path dir = model_arg(a.require("--model")).path;
  const auto vc = std::filesystem::is_directory(dir) ? load_vision_config(dir / "config.json") : std::nullopt;
  if (!vc) throw Error(dir.string() + ": no vision_config, so image parts cannot be expanded");
  const ModelConfig mc = load_config(dir / "config.json");
  std::string missing;
  const ImageTokenIds image_ids = resolve_image_token_ids(mc, &vocab, missing);
  if (!missing.empty()) throw Error(dir.string() + ": the image token " + missing + " has no id in config.json or the tokenizer");
  server::GenerationSpec spec;
  spec.images = parts;
  server::ImageOptions o;
  o.default_budget = int(a.get_int("--image-tokens", 0));
  std::vector<int> prompt(ids.begin(), ids.end());
  for (const auto& p : parts)
    if (p.url.rfind("data:", 0) != 0) throw Error("'" + p.where + "': g4 tokenize reads data: URLs only (it fetches nothing)");
  auto images = server::prepare_images(spec, prompt, image_ids, *vc, o);
  if (auto* e = std::get_if<server::ApiError>(&images)) throw Error(e->message);
  ids.assign(prompt.begin(), prompt.end());
  json spans = json::array();
  for (const auto& img : std::get<std::vector<std::shared_ptr<const PromptImage>>>(images))
    spans.push_back({{"first", img->span.first}, {"count", img->span.count}, {"grid", {img->grid_rows, img->grid_cols}}});
  return spans;
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--tokenizer", "--model", "--text", "--jsonl", "--decode", "--chat", "--image-tokens"},
         {"--bos", "--skip-special", "--thinking", "--no-generation-prompt"});
  const int modes = a.has("--text") + a.has("--jsonl") + a.has("--decode") + a.has("--chat");
  if (modes != 1) throw Error("give exactly one of --text, --jsonl, --decode, --chat (see --help)");
  const text::Tokenizer tok = load(a);
  const text::EncodeOptions enc{.add_bos = a.has("--bos")};

  if (a.has("--text")) {
    std::printf("%s\n", json(tok.encode(a.require("--text"), enc)).dump().c_str());
    return 0;
  }
  if (a.has("--jsonl")) {
    const std::string path = a.require("--jsonl");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(path + ": cannot open");
    std::string line, out;
    for (size_t n = 1; std::getline(f, line); ++n) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      const json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) throw Error(path + ":" + std::to_string(n) + ": invalid JSON");
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
        throw Error(path + ":" + std::to_string(n) + ": no string \"text\" field");
      out = json(tok.encode(j["text"].get_ref<const std::string&>(), enc)).dump();
      out += '\n';
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
    return 0;
  }
  if (a.has("--decode")) {
    const std::vector<int> ids = parse_int_list(a.require("--decode"), "--decode");
    for (int id : ids)
      if (!tok.vocab().valid_id(id))
        throw Error("--decode: id " + std::to_string(id) + " is outside the vocabulary (0.." +
                    std::to_string(tok.vocab().size() - 1) + ")");
    const std::vector<int32_t> ids32(ids.begin(), ids.end());
    const std::string text = tok.decode(ids32, {.skip_special = a.has("--skip-special")});
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  const json chat = read_json_file(a.require("--chat"));
  const json messages = chat.is_object() ? chat.value("messages", json()) : chat;
  const json tools = chat.is_object() ? chat.value("tools", json()) : json();
  text::ChatOptions opt = text::chat_options_for(tok.vocab());
  opt.enable_thinking = a.has("--thinking");
  opt.add_generation_prompt = !a.has("--no-generation-prompt");
  const std::string rendered = text::render_chat(messages, tools, opt);
  std::vector<int32_t> ids;
  const auto missing = text::missing_template_tokens(tok.vocab());
  if (missing.empty()) {
    ids = text::encode_chat(tok, messages, tools, opt);
  } else {
    std::string list;
    for (const auto& m : missing) list += " " + m;
    std::fprintf(stderr, "g4 tokenize: warning: this tokenizer lacks the Gemma 4 template tokens%s; "
                 "they are encoded as plain text\n", list.c_str());
    ids = tok.encode(rendered);
  }
  const json images = expand_chat_images(a, messages, tok.vocab(), ids);
  json out = {{"text", rendered}, {"ids", ids}};
  if (!images.is_null()) out["images"] = images;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

const Registration reg{"tokenize", "encode/decode text and render chats with a tokenizer.json", kUsage, run};

}  // namespace
}  // namespace g4::cli
