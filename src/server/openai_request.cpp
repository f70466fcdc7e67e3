#include "server/openai_request.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>

#include "engine/grammar.h"
#include "engine/json_schema_grammar.h"

namespace g4::server {

using nlohmann::json;

namespace {

std::string type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    default: return "an unsupported value";
  }
}

ApiError wrong_type(const std::string& field, const std::string& want, const json& got) {
  return bad_request("'" + field + "' must be " + want + ", got " + type_name(got), field, "invalid_type");
}

// A small validation context: the first error wins; getters return false when the field is absent
// (or null, which OpenAI clients send for "not set").
struct Reader {
  const json& body;
  std::optional<ApiError> error;

  const json* find(const char* key) const {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool fail(ApiError e) {
    if (!error) error = std::move(e);
    return false;
  }
  bool number(const char* key, double lo, double hi, double& out) {
    const json* v = find(key);
    if (!v) return false;
    if (!v->is_number()) return fail(wrong_type(key, "a number", *v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
      return fail(bad_request("'" + std::string(key) + "' is " + v->dump() + "; it must be between " + json(lo).dump() +
                                  " and " + json(hi).dump(),
                              key, "invalid_value"));
    out = x;
    return true;
  }
  bool integer(const char* key, int64_t lo, int64_t hi, int64_t& out) {
    const json* v = find(key);
    if (!v) return false;
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
        out = int64_t(d);
      } else {
        return fail(wrong_type(key, "an integer", *v));
      }
    } else if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      out = u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(u);
    } else if (v->is_number_integer()) {
      out = v->get<int64_t>();
    } else {
      return fail(wrong_type(key, "an integer", *v));
    }
    if (out < lo || out > hi)
      return fail(bad_request("'" + std::string(key) + "' is " + std::to_string(out) + "; it must be between " +
                                  std::to_string(lo) + " and " + std::to_string(hi),
                              key, "invalid_value"));
    return true;
  }
  bool boolean(const char* key, bool& out) {
    const json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) return fail(wrong_type(key, "a boolean", *v));
    out = v->get<bool>();
    return true;
  }
};

// Every top-level field a request may carry; anything else is refused by name (as OpenAI does),
// never ignored. Fields that are accepted but change nothing about the output are marked.
const std::set<std::string>& known_fields(Endpoint e) {
  static const std::set<std::string> common = {
      "model", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
      "repetition_penalty", "seed", "n", "max_tokens", "stop", "logit_bias", "stream", "stream_options", "g4",
      "logprobs", "response_format", "grammar",
      "user"};  // user: an end-user id for the caller's own records; it does not change the output
  static const std::set<std::string> chat = [] {
    std::set<std::string> k = common;
    for (const char* f : {"messages", "tools", "tool_choice", "chat_template_kwargs", "reasoning_effort", "top_logprobs",
                          "max_completion_tokens", "parallel_tool_calls"})
      k.insert(f);
    return k;
  }();
  static const std::set<std::string> completion = [] {
    std::set<std::string> k = common;
    for (const char* f : {"prompt", "echo"}) k.insert(f);
    return k;
  }();
  return e == Endpoint::chat ? chat : completion;
}

std::optional<ApiError> check_known_fields(const json& body, Endpoint e) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!known_fields(e).count(it.key()))
      return bad_request("'" + it.key() + "' is not supported by this server (g4 refuses request fields it would not honour)",
                         it.key(), "unsupported_parameter");
  return std::nullopt;
}

// response_format (text | json_object | json_schema) and the `grammar` extension (GBNF text):
// both become the GBNF that constrains decoding; a schema keyword g4 cannot honour is a 400
// naming its path.
void read_output_constraint(Reader& r, GenerationSpec& s) {
  if (const json* rf = r.find("response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      r.fail(bad_request("'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}",
                         "response_format", "invalid_value"));
      return;
    }
    const std::string type = (*rf)["type"];
    if (type == "json_object") {
      s.grammar = grammar::json_object_gbnf();
      s.grammar_source = "response_format.json_object";
    } else if (type == "json_schema") {
      const json* js = rf->contains("json_schema") ? &(*rf)["json_schema"] : nullptr;
      if (!js || !js->is_object() || !js->contains("name") || !(*js)["name"].is_string()) {
        r.fail(bad_request("'response_format.json_schema' must be an object with a 'name' and a 'schema'",
                           "response_format.json_schema", "invalid_value"));
        return;
      }
      for (auto it = js->begin(); it != js->end(); ++it)
        if (it.key() != "name" && it.key() != "schema" && it.key() != "strict" && it.key() != "description") {
          r.fail(bad_request("'response_format.json_schema." + it.key() + "' is not supported", "response_format.json_schema." + it.key(),
                             "unsupported_parameter"));
          return;
        }
      if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null()) {
        r.fail(wrong_type("response_format.json_schema.strict", "a boolean", (*js)["strict"]));
        return;
      }
      const json schema = js->contains("schema") ? (*js)["schema"] : json::object();
      try {
        s.grammar = grammar::json_schema_gbnf(schema);
      } catch (const grammar::SchemaError& e) {
        r.fail(bad_request(std::string(e.what()), "response_format.json_schema.schema" + (e.path().empty() ? "" : "." + e.path()),
                           "unsupported_schema"));
        return;
      } catch (const Error& e) {
        r.fail(bad_request(std::string("response_format.json_schema.schema: ") + e.what(), "response_format.json_schema.schema",
                           "invalid_schema"));
        return;
      }
      s.grammar_source = "response_format.json_schema";
    } else if (type != "text") {
      r.fail(bad_request("'response_format.type' is \"" + type + "\"; expected text, json_object or json_schema",
                         "response_format.type", "invalid_value"));
      return;
    }
  }
  if (const json* g = r.find("grammar")) {
    if (!g->is_string()) {
      r.fail(wrong_type("grammar", "a string of GBNF grammar text", *g));
      return;
    }
    if (!s.grammar.empty()) {
      r.fail(bad_request("'grammar' and a JSON 'response_format' cannot both constrain one response", "grammar"));
      return;
    }
    try {
      grammar::parse_gbnf(g->get<std::string>());
    } catch (const Error& e) {
      r.fail(bad_request(std::string("'grammar': ") + e.what(), "grammar", "invalid_grammar"));
      return;
    }
    s.grammar = g->get<std::string>();
    s.grammar_source = "grammar";
  }
}

// Fields both endpoints share: model, sampling, stop, stream, seed, n, g4 extension.
void read_common(Reader& r, GenerationSpec& s, const RequestLimits& limits) {
  const json* model = r.find("model");
  if (!model) {
    r.fail(bad_request("you must provide a model parameter ('model': \"" + limits.model_name + "\")", "model",
                       "missing_required_field"));
    return;
  }
  if (!model->is_string()) {
    r.fail(wrong_type("model", "a string", *model));
    return;
  }
  s.model = model->get<std::string>();
  if (s.model != limits.model_name) {
    r.fail(ApiError{404, "the model '" + s.model + "' does not exist; this server serves '" + limits.model_name + "'",
                    "invalid_request_error", "model", "model_not_found"});
    return;
  }
  SamplingParams& p = s.sampling;
  double x;
  int64_t i;
  if (r.number("temperature", 0, 2, x)) p.temperature = float(x);
  if (r.number("top_p", 0, 1, x)) {
    if (x <= 0) r.fail(bad_request("'top_p' must be greater than 0", "top_p", "invalid_value"));
    p.top_p = float(x);
  }
  if (r.integer("top_k", -1, limits.vocab_size, i)) p.top_k = i < 0 ? 0 : int(i);  // -1: off (vLLM)
  if (r.number("min_p", 0, 1, x)) p.min_p = float(x);
  if (r.number("presence_penalty", -2, 2, x)) p.presence_penalty = float(x);
  if (r.number("frequency_penalty", -2, 2, x)) p.frequency_penalty = float(x);
  if (r.number("repetition_penalty", 0.01, 10, x)) p.repetition_penalty = float(x);
  if (r.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), i))
    p.seed = uint64_t(i);
  if (r.integer("n", 1, limits.max_choices, i)) s.n = int(i);  // above max_choices: the error names n and the bound
  // max_completion_tokens is the newer name; it wins when both are given.
  p.max_tokens = limits.default_max_tokens;
  const int64_t cap = limits.max_context - 1;
  if (r.integer("max_tokens", 1, cap, i)) p.max_tokens = int(i);
  if (r.integer("max_completion_tokens", 1, cap, i)) p.max_tokens = int(i);

  if (const json* stop = r.find("stop")) {
    if (stop->is_string()) {
      p.stop_strings.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > 16) r.fail(bad_request("'stop' has " + std::to_string(stop->size()) + " entries; at most 16", "stop"));
      for (const auto& e : *stop) {
        if (!e.is_string()) {
          r.fail(wrong_type("stop", "a string or an array of strings", e));
          break;
        }
        p.stop_strings.push_back(e.get<std::string>());
      }
    } else {
      r.fail(wrong_type("stop", "a string or an array of strings", *stop));
    }
    for (const auto& st : p.stop_strings)
      if (st.empty()) r.fail(bad_request("'stop' strings must not be empty", "stop", "invalid_value"));
  }
  if (const json* bias = r.find("logit_bias")) {
    if (!bias->is_object()) {
      r.fail(wrong_type("logit_bias", "an object mapping token ids to numbers", *bias));
    } else {
      for (const auto& [k, v] : bias->items()) {
        char* end = nullptr;
        const long id = std::strtol(k.c_str(), &end, 10);
        if (k.empty() || *end != '\0' || id < 0 || id >= limits.vocab_size) {
          r.fail(bad_request("'logit_bias' key \"" + k + "\" is not a token id in [0, " + std::to_string(limits.vocab_size) + ")",
                             "logit_bias", "invalid_value"));
          break;
        }
        if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100) {
          r.fail(bad_request("'logit_bias' values must be numbers between -100 and 100", "logit_bias", "invalid_value"));
          break;
        }
        p.logit_bias[int(id)] = v.get<float>();
      }
    }
  }
  r.boolean("stream", s.stream);
  if (const json* so = r.find("stream_options")) {
    if (!so->is_object()) {
      r.fail(wrong_type("stream_options", "an object", *so));
    } else if (auto it = so->find("include_usage"); it != so->end() && !it->is_null()) {
      if (!it->is_boolean()) r.fail(wrong_type("stream_options.include_usage", "a boolean", *it));
      else s.include_usage = it->get<bool>();
    }
    if (!s.stream && !r.error)
      r.fail(bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options"));
  }
  read_output_constraint(r, s);
  // g4 extension: {"g4": {"deadline_ms": N}} lowers the server's per-request deadline.
  if (const json* ext = r.find("g4")) {
    if (!ext->is_object()) {
      r.fail(wrong_type("g4", "an object", *ext));
    } else if (auto it = ext->find("deadline_ms"); it != ext->end()) {
      if (!it->is_number() || it->get<double>() <= 0)
        r.fail(bad_request("'g4.deadline_ms' must be a positive number", "g4.deadline_ms", "invalid_value"));
      else
        s.deadline_seconds = std::min(it->get<double>() / 1000.0, limits.max_deadline_seconds);
    }
  }
}

}  // namespace

size_t invalid_utf8_offset(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = uint8_t(s[i]);
    int len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return i;
    }
    if (i + size_t(len) > s.size()) return i;
    for (int k = 1; k < len; ++k) {
      const uint8_t cc = uint8_t(s[i + size_t(k)]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += size_t(len);
  }
  return std::string_view::npos;
}

std::variant<json, ApiError> parse_json_object(std::string_view body) {
  if (body.empty()) return bad_request("the request body is empty; send a JSON object", "", "invalid_json");
  if (const size_t at = invalid_utf8_offset(body); at != std::string_view::npos)
    return bad_request("the request body is not valid UTF-8 (byte offset " + std::to_string(at) + ")", "",
                       "invalid_utf8");
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again for the position and reason (only on the error path).
    try {
      const json again = json::parse(body);
      (void)again;
    } catch (const json::exception& e) {  // parse_error, or out_of_range.406 for a number too large (was a 500)
      return bad_request(std::string("malformed JSON: ") + e.what(), "", "invalid_json");
    }
    return bad_request("malformed JSON", "", "invalid_json");
  }
  if (!j.is_object()) return bad_request("the request body must be a JSON object, got " + type_name(j), "", "invalid_json");
  return j;
}

std::variant<GenerationSpec, ApiError> parse_chat_request(const json& body, const RequestLimits& limits) {
  if (auto e = check_known_fields(body, Endpoint::chat)) return *e;
  Reader r{body, std::nullopt};
  GenerationSpec s;
  s.endpoint = Endpoint::chat;
  read_common(r, s, limits);
  if (r.error) return *r.error;

  const json* messages = r.find("messages");
  if (!messages) return bad_request("'messages' is required", "messages", "missing_required_field");
  if (!messages->is_array()) return wrong_type("messages", "an array of message objects", *messages);
  if (messages->empty()) return bad_request("'messages' must contain at least one message", "messages", "invalid_value");
  static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  for (size_t k = 0; k < messages->size(); ++k) {
    const json& m = (*messages)[k];
    const std::string where = "messages[" + std::to_string(k) + "]";
    if (!m.is_object()) return wrong_type(where, "an object", m);
    auto role = m.find("role");
    if (role == m.end()) return bad_request("'" + where + ".role' is required", where + ".role", "missing_required_field");
    if (!role->is_string()) return wrong_type(where + ".role", "a string", *role);
    bool known = false;
    for (const char* rr : kRoles) known = known || *role == rr;
    if (!known)
      return bad_request("'" + where + ".role' is \"" + role->get<std::string>() +
                             "\"; expected system, developer, user, assistant or tool",
                         where + ".role", "invalid_value");
    auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array())
      return wrong_type(where + ".content", "a string, an array of content parts or null", *content);
    if (content != m.end() && content->is_array()) {
      for (size_t j = 0; j < content->size(); ++j) {
        const json& part = (*content)[j];
        const std::string pw = where + ".content[" + std::to_string(j) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
          return bad_request("'" + pw + "' must be a content part object with a 'type'", pw, "invalid_value");
        const std::string type = part["type"];
        if (type != "text")
          return bad_request("'" + pw + ".type' is \"" + type +
                                 "\": g4 serves Gemma 4's text decoder only, so only \"text\" content parts are "
                                 "accepted (an image or audio part would be answered without being seen)",
                             pw + ".type", "unsupported_content_type");
        if (!part.contains("text") || !part["text"].is_string())
          return bad_request("'" + pw + ".text' must be a string", pw + ".text", "invalid_value");
      }
    }
  }
  s.messages = *messages;

  if (const json* tools = r.find("tools")) {
    if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
    for (size_t k = 0; k < tools->size(); ++k) {
      const json& t = (*tools)[k];
      const std::string where = "tools[" + std::to_string(k) + "]";
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
        return bad_request("'" + where + "' must be {\"type\": \"function\", \"function\": {...}}", where);
      if (t.contains("type") && t["type"] != "function")
        return bad_request("'" + where + ".type' must be \"function\"", where + ".type");
      const json& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
        return bad_request("'" + where + ".function.name' is required and must be a non-empty string",
                           where + ".function.name", "missing_required_field");
    }
    s.tools = *tools;
  }
  if (const json* tc = r.find("tool_choice")) {
    if (tc->is_string()) {
      const std::string v = tc->get<std::string>();
      if (v != "none" && v != "auto" && v != "required")
        return bad_request("'tool_choice' is \"" + v + "\"; expected none, auto, required or a function object", "tool_choice");
      s.tool_choice = v;
    } else if (tc->is_object()) {
      const json* fn = tc->contains("function") ? &(*tc)["function"] : nullptr;
      if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        return bad_request("'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      const std::string name = (*fn)["name"];
      json only = json::array();
      if (s.tools.is_array())
        for (const auto& t : s.tools)
          if (t["function"]["name"] == name) only.push_back(t);
      if (only.empty()) return bad_request("'tool_choice' names the function '" + name + "', which is not in 'tools'", "tool_choice");
      s.tools = only;  // the model is shown only the chosen function
      s.tool_choice = "function";
      s.forced_function = name;
    } else {
      return wrong_type("tool_choice", "a string or an object", *tc);
    }
    if (s.tool_choice != "none" && s.tool_choice != "auto" && !s.tools.is_array())
      return bad_request("'tool_choice' is set but 'tools' is missing", "tool_choice");
  }
  if (s.tool_choice == "none") s.tools = nullptr;
  if (const json* ptc = r.find("parallel_tool_calls")) {
    if (!ptc->is_boolean()) return wrong_type("parallel_tool_calls", "a boolean", *ptc);
    if (!ptc->get<bool>() && s.tool_choice == "auto" && s.tools.is_array())
      return bad_request("'parallel_tool_calls': false is only honoured with tool_choice \"required\" or a named function "
                         "(which produce exactly one call); with \"auto\" the model may write several",
                         "parallel_tool_calls", "unsupported_value");
  }
  if (!s.grammar.empty() && (s.tool_choice == "required" || s.tool_choice == "function"))
    return bad_request("'" + s.grammar_source + "' and a forced 'tool_choice' cannot both constrain one response",
                       "tool_choice");

  // Thinking: chat_template_kwargs.enable_thinking (vLLM, SGLang) or reasoning_effort (OpenAI).
  if (const json* kw = r.find("chat_template_kwargs")) {
    if (!kw->is_object()) return wrong_type("chat_template_kwargs", "an object", *kw);
    if (auto it = kw->find("enable_thinking"); it != kw->end() && !it->is_null()) {
      if (!it->is_boolean()) return wrong_type("chat_template_kwargs.enable_thinking", "a boolean", *it);
      s.enable_thinking = it->get<bool>();
    }
  }
  if (const json* effort = r.find("reasoning_effort")) {
    if (!effort->is_string()) return wrong_type("reasoning_effort", "a string", *effort);
    const std::string e = effort->get<std::string>();
    if (e == "none" || e == "minimal") s.enable_thinking = false;
    else if (e == "low" || e == "medium" || e == "high") s.enable_thinking = true;
    else return bad_request("'reasoning_effort' is \"" + e + "\"; expected none, minimal, low, medium or high", "reasoning_effort");
  }

  if (s.enable_thinking && !s.grammar.empty())
    return bad_request("thinking cannot be combined with '" + s.grammar_source +
                           "' (the grammar constrains the whole output, so the model could not think first)",
                       s.grammar_source);

  // logprobs: a boolean, with top_logprobs 0..20.
  if (const json* lp = r.find("logprobs")) {
    if (!lp->is_boolean()) return wrong_type("logprobs", "a boolean", *lp);
    s.sampling.logprobs = lp->get<bool>();
  }
  int64_t top = 0;
  if (r.integer("top_logprobs", 0, 20, top)) {
    if (!s.sampling.logprobs && top > 0)
      return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    s.sampling.top_logprobs = int(top);
  }
  if (r.error) return *r.error;
  return s;
}

std::variant<GenerationSpec, ApiError> parse_completion_request(const json& body, const RequestLimits& limits) {
  if (auto e = check_known_fields(body, Endpoint::completion)) return *e;
  Reader r{body, std::nullopt};
  GenerationSpec s;
  s.endpoint = Endpoint::completion;
  read_common(r, s, limits);
  if (r.error) return *r.error;
  const json* prompt = r.find("prompt");
  if (!prompt) return bad_request("'prompt' is required", "prompt", "missing_required_field");
  auto token_list = [&](const json& arr) -> std::optional<ApiError> {
    for (const auto& t : arr) {
      if (!t.is_number_integer()) return wrong_type("prompt", "a string, an array of one string, or an array of token ids", t);
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= limits.vocab_size)
        return bad_request("'prompt' token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                               std::to_string(limits.vocab_size) + ")",
                           "prompt", "invalid_value");
      s.prompt_tokens.push_back(int(id));
    }
    s.prompt_is_tokens = true;
    return std::nullopt;
  };
  if (prompt->is_string()) {
    s.prompt = prompt->get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string()) {
    if (prompt->size() != 1)
      return bad_request("'prompt' holds " + std::to_string(prompt->size()) + " prompts; this server takes one per request", "prompt");
    s.prompt = (*prompt)[0].get<std::string>();
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_array()) {
    if (prompt->size() != 1)
      return bad_request("'prompt' holds " + std::to_string(prompt->size()) + " prompts; this server takes one per request", "prompt");
    if (auto e = token_list((*prompt)[0])) return *e;
  } else if (prompt->is_array()) {
    if (auto e = token_list(*prompt)) return *e;
  } else {
    return wrong_type("prompt", "a string, an array of one string, or an array of token ids", *prompt);
  }
  if (!s.prompt_is_tokens && s.prompt.empty()) return bad_request("'prompt' is empty", "prompt", "invalid_value");
  if (s.prompt_is_tokens && s.prompt_tokens.empty()) return bad_request("'prompt' is empty", "prompt", "invalid_value");
  // Legacy logprobs: an integer 0..5 (that many alternatives, plus the chosen token).
  int64_t lp = 0;
  if (const json* v = r.find("logprobs"); v && v->is_boolean()) {
    s.sampling.logprobs = v->get<bool>();
  } else if (r.integer("logprobs", 0, 20, lp)) {
    s.sampling.logprobs = true;
    s.sampling.top_logprobs = int(lp);
  }
  bool echo = false;
  if (r.boolean("echo", echo) && echo) return bad_request("'echo' is not supported", "echo");
  if (r.error) return *r.error;
  return s;
}

std::variant<std::monostate, ApiError> check_prompt_length(size_t n, const GenerationSpec& spec, const RequestLimits& limits) {
  const char* field = spec.endpoint == Endpoint::chat ? "messages" : "prompt";
  if (n == 0) return bad_request("the prompt encodes to no tokens", field, "invalid_value");
  if (int64_t(n) >= limits.max_context)
    return bad_request("the prompt is " + std::to_string(n) + " tokens; this server's context is " +
                           std::to_string(limits.max_context) + " tokens (prompt + completion)",
                       field, "context_length_exceeded");
  return std::monostate{};
}

std::string forced_tool_call_prefix(const GenerationSpec& spec) {
  if (spec.endpoint != Endpoint::chat || !spec.tools.is_array()) return "";
  if (spec.tool_choice == "required") return "<|tool_call>call:";
  if (spec.tool_choice == "function") return "<|tool_call>call:" + spec.forced_function + "{";
  return "";
}

}  // namespace g4::server
