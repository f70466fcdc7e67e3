#include "server/openai_request.h"

#include <optional>

#include "server/image_parts.h"
#include "server/request_fields.h"

namespace g4::server {

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

std::variant<RequestJson, ApiError> parse_json_object(std::string_view body) {
  if (body.empty()) return bad_request("the request body is empty; send a JSON object", "", "invalid_json");
  if (const size_t at = invalid_utf8_offset(body); at != std::string_view::npos)
    return bad_request("the request body is not valid UTF-8 (byte offset " + std::to_string(at) + ")", "",
                       "invalid_utf8");
  RequestJson j = RequestJson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    // Parse again for the position and reason (only on the error path).
    try {
      const RequestJson again = RequestJson::parse(body);
      (void)again;
    } catch (const RequestJson::exception& e) {  // parse_error, or out_of_range.406 for a number too large (was a 500)
      return bad_request(std::string("malformed JSON: ") + e.what(), "", "invalid_json");
    }
    return bad_request("malformed JSON", "", "invalid_json");
  }
  if (!j.is_object()) return bad_request("the request body must be a JSON object, got " + type_name(j), "", "invalid_json");
  return j;
}

namespace {

// A message's content parts: text, and images where the model has a vision tower (user
// messages only: the template writes a system prompt's parts as text). Image parts are
// collected in order, as the template writes their placeholders.
std::optional<ApiError> check_content_parts(const RequestJson& content, const std::string& where, const std::string& role,
                                            const RequestLimits& limits, std::vector<ImagePart>& images) {
  for (size_t j = 0; j < content.size(); ++j) {
    const RequestJson& part = content[j];
    const std::string pw = where + ".content[" + std::to_string(j) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad_request("'" + pw + "' must be a content part object with a 'type'", pw, "invalid_value");
    const std::string type = part["type"];
    if (type == "image_url") {
      if (!limits.accepts_images)
        return bad_request("'" + pw + "' is an image, and " + limits.images_refused +
                               " (an image would be answered without being seen)",
                           pw + ".type", "unsupported_content_type");
      if (role != "user")
        return bad_request("'" + pw + "': image parts are accepted in user messages only, not in a " + role + " message",
                           pw + ".type", "unsupported_content_type");
      auto p = read_image_url_part(part, pw);
      if (auto* e = std::get_if<ApiError>(&p)) return *e;
      images.push_back(std::get<ImagePart>(std::move(p)));
      continue;
    }
    if (type != "text")
      return bad_request("'" + pw + ".type' is \"" + type +
                             "\": g4 accepts \"text\" and \"image_url\" content parts (an audio or file part would be "
                             "answered without being heard or read)",
                         pw + ".type", "unsupported_content_type");
    if (!part.contains("text") || !part["text"].is_string())
      return bad_request("'" + pw + ".text' must be a string", pw + ".text", "invalid_value");
  }
  return std::nullopt;
}

// messages[k]: an object with a known role and string, text-part or null content.
std::optional<ApiError> check_message(const RequestJson& m, size_t k, const RequestLimits& limits,
                                      std::vector<ImagePart>& images) {
  static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
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
  if (content != m.end() && content->is_array())
    return check_content_parts(*content, where, role->get<std::string>(), limits, images);
  return std::nullopt;
}

std::optional<ApiError> read_chat_messages(Reader& r, GenerationSpec& s, const RequestLimits& limits) {
  const RequestJson* messages = r.find("messages");
  if (!messages) return bad_request("'messages' is required", "messages", "missing_required_field");
  if (!messages->is_array()) return wrong_type("messages", "an array of message objects", *messages);
  if (messages->empty()) return bad_request("'messages' must contain at least one message", "messages", "invalid_value");
  for (size_t k = 0; k < messages->size(); ++k)
    if (auto e = check_message((*messages)[k], k, limits, s.images)) return e;
  s.messages = *messages;
  return std::nullopt;
}

// tools: function tools, each with a non-empty name.
std::optional<ApiError> read_chat_tools(Reader& r, GenerationSpec& s) {
  const RequestJson* tools = r.find("tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
  for (size_t k = 0; k < tools->size(); ++k) {
    const RequestJson& t = (*tools)[k];
    const std::string where = "tools[" + std::to_string(k) + "]";
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      return bad_request("'" + where + "' must be {\"type\": \"function\", \"function\": {...}}", where);
    if (t.contains("type") && t["type"] != "function")
      return bad_request("'" + where + ".type' must be \"function\"", where + ".type");
    const RequestJson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      return bad_request("'" + where + ".function.name' is required and must be a non-empty string",
                         where + ".function.name", "missing_required_field");
  }
  s.tools = *tools;
  return std::nullopt;
}

// tool_choice: none | auto | required | {"type": "function", "function": {"name"}} (the model is
// then shown only that function); "none" also hides the tools.
std::optional<ApiError> read_tool_choice(Reader& r, GenerationSpec& s) {
  if (const RequestJson* tc = r.find("tool_choice")) {
    if (tc->is_string()) {
      const std::string v = tc->get<std::string>();
      if (v != "none" && v != "auto" && v != "required")
        return bad_request("'tool_choice' is \"" + v + "\"; expected none, auto, required or a function object", "tool_choice");
      s.tool_choice = v;
    } else if (tc->is_object()) {
      const RequestJson* fn = tc->contains("function") ? &(*tc)["function"] : nullptr;
      if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
        return bad_request("'tool_choice' object must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
      const std::string name = (*fn)["name"];
      RequestJson only = RequestJson::array();
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
  return std::nullopt;
}

std::optional<ApiError> read_parallel_tool_calls(Reader& r, const GenerationSpec& s) {
  const RequestJson* ptc = r.find("parallel_tool_calls");
  if (!ptc) return std::nullopt;
  if (!ptc->is_boolean()) return wrong_type("parallel_tool_calls", "a boolean", *ptc);
  if (!ptc->get<bool>() && s.tool_choice == "auto" && s.tools.is_array())
    return bad_request("'parallel_tool_calls': false is only honoured with tool_choice \"required\" or a named function "
                       "(which produce exactly one call); with \"auto\" the model may write several",
                       "parallel_tool_calls", "unsupported_value");
  return std::nullopt;
}

// Thinking: chat_template_kwargs.enable_thinking (vLLM, SGLang) or reasoning_effort (OpenAI).
std::optional<ApiError> read_thinking(Reader& r, GenerationSpec& s) {
  if (const RequestJson* kw = r.find("chat_template_kwargs")) {
    if (!kw->is_object()) return wrong_type("chat_template_kwargs", "an object", *kw);
    if (auto it = kw->find("enable_thinking"); it != kw->end() && !it->is_null()) {
      if (!it->is_boolean()) return wrong_type("chat_template_kwargs.enable_thinking", "a boolean", *it);
      s.enable_thinking = it->get<bool>();
    }
  }
  if (const RequestJson* effort = r.find("reasoning_effort")) {
    if (!effort->is_string()) return wrong_type("reasoning_effort", "a string", *effort);
    const std::string e = effort->get<std::string>();
    if (e == "none" || e == "minimal") s.enable_thinking = false;
    else if (e == "low" || e == "medium" || e == "high") s.enable_thinking = true;
    else return bad_request("'reasoning_effort' is \"" + e + "\"; expected none, minimal, low, medium or high", "reasoning_effort");
  }
  return std::nullopt;
}

// logprobs: a boolean, with top_logprobs 0..20 (a range error goes to r.error).
std::optional<ApiError> read_chat_logprobs(Reader& r, GenerationSpec& s) {
  if (const RequestJson* lp = r.find("logprobs")) {
    if (!lp->is_boolean()) return wrong_type("logprobs", "a boolean", *lp);
    s.sampling.logprobs = lp->get<bool>();
  }
  int64_t top = 0;
  if (r.integer("top_logprobs", 0, 20, top)) {
    if (!s.sampling.logprobs && top > 0)
      return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    s.sampling.top_logprobs = int(top);
  }
  return std::nullopt;
}

}  // namespace

std::variant<GenerationSpec, ApiError> parse_chat_request(const RequestJson& body, const RequestLimits& limits) {
  Reader r{body, std::nullopt};
  GenerationSpec s;
  if (auto e = read_common(r, s, Endpoint::chat, limits)) return *e;
  if (auto e = read_chat_messages(r, s, limits)) return *e;
  if (auto e = read_chat_tools(r, s)) return *e;
  if (auto e = read_tool_choice(r, s)) return *e;
  if (auto e = read_parallel_tool_calls(r, s)) return *e;
  if (!s.grammar.empty() && (s.tool_choice == "required" || s.tool_choice == "function"))
    return bad_request("'" + s.grammar_source + "' and a forced 'tool_choice' cannot both constrain one response",
                       "tool_choice");
  if (auto e = read_thinking(r, s)) return *e;
  if (s.enable_thinking && !s.grammar.empty())
    return bad_request("thinking cannot be combined with '" + s.grammar_source +
                           "' (the grammar constrains the whole output, so the model could not think first)",
                       s.grammar_source);
  if (auto e = read_chat_logprobs(r, s)) return *e;
  if (r.error) return *r.error;
  return s;
}

std::variant<GenerationSpec, ApiError> parse_completion_request(const RequestJson& body, const RequestLimits& limits) {
  Reader r{body, std::nullopt};
  GenerationSpec s;
  if (auto e = read_common(r, s, Endpoint::completion, limits)) return *e;
  const RequestJson* prompt = r.find("prompt");
  if (!prompt) return bad_request("'prompt' is required", "prompt", "missing_required_field");
  auto token_list = [&](const RequestJson& arr) -> std::optional<ApiError> {
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
  if (const RequestJson* v = r.find("logprobs"); v && v->is_boolean()) {
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
