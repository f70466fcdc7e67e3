#include "text/chat_template.h"

#include <algorithm>

#include "platform/error.h"
#include "text/tool_syntax.h"

namespace g4::text {

using json = nlohmann::json;

namespace {

constexpr const char* kTemplateTokens[] = {"<|turn>",      "<turn|>",        "<|think|>",        "<|channel>",
                                           "<channel|>",   "<|tool>",        "<tool|>",          "<|tool_call>",
                                           "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};

// Jinja truthiness for a JSON value that may be absent.
bool truthy(const json* v) {
  if (!v || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  if (v->is_array() || v->is_object()) return !v->empty();
  if (v->is_number_integer()) return v->get<int64_t>() != 0;
  if (v->is_number()) return v->get<double>() != 0.0;
  return true;
}
const json* field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}
// What {{ value }} prints: strings as they are, missing/null as nothing, others as JSON.
std::string text_of(const json* v) {
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->get<std::string>();
  return v->dump();
}
std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(uint8_t(c)));
  return s;
}
std::string type_upper(const json& value) {
  const json* t = field(value, "type");
  return t && t->is_string() ? upper(t->get<std::string>()) : "";
}

// Python str.strip(): ASCII whitespace and the C0 separators it also strips.
std::string trim(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); };
  size_t b = 0, e = s.size();
  while (b < e && ws(s[b])) ++b;
  while (e > b && ws(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Earlier thinking is not shown back to the model: drop every <|channel>...<channel|> block.
std::string strip_thinking(const std::string& text) {
  std::string out;
  size_t at = 0;
  for (;;) {
    const size_t close = text.find("<channel|>", at);
    const std::string_view part = std::string_view(text).substr(at, close == std::string::npos ? std::string::npos : close - at);
    const size_t open = part.find("<|channel>");
    out += part.substr(0, open);
    if (close == std::string::npos) break;
    at = close + std::string_view("<channel|>").size();
  }
  return trim(out);
}

void quoted_list(std::string& out, const json* list) {
  out += '[';
  if (list && list->is_array())
    for (size_t i = 0; i < list->size(); ++i) {
      if (i) out += ',';
      out.append(kToolQuote).append(text_of(&(*list)[i])).append(kToolQuote);
    }
  out += ']';
}

void format_parameters(std::string& out, const json& properties, bool filter_keys);

void format_parameter(std::string& out, const std::string& key, const json& value) {
  out += key + ":{";
  bool add_comma = false;
  auto comma = [&] {
    if (add_comma) out += ',';
    else add_comma = true;
  };
  if (truthy(field(value, "description"))) {
    out.append("description:").append(kToolQuote).append(text_of(field(value, "description"))).append(kToolQuote);
    add_comma = true;
  }
  const std::string type = type_upper(value);
  if (type == "STRING") {
    if (truthy(field(value, "enum"))) {
      comma();
      out += "enum:";
      format_tool_value(out, *field(value, "enum"), true);
    }
  } else if (type == "ARRAY") {
    const json* items = field(value, "items");
    if (items && items->is_object() && !items->empty()) {
      comma();
      out += "items:{";
      bool first = true;
      for (const auto& [ik, iv] : dictsort(*items)) {
        if (iv->is_null()) continue;
        if (!first) out += ',';
        first = false;
        if (ik == "properties") {
          out += "properties:{";
          if (iv->is_object()) format_parameters(out, *iv, false);
          out += '}';
        } else if (ik == "required") {
          out += "required:";
          quoted_list(out, iv);
        } else if (ik == "type") {
          out += "type:";
          if (iv->is_string()) {
            format_tool_value(out, upper(iv->get<std::string>()), true);
          } else {
            json ups = json::array();
            if (iv->is_array())
              for (const auto& x : *iv) ups.push_back(upper(text_of(&x)));
            format_tool_value(out, ups, true);
          }
        } else {
          out += ik + ":";
          format_tool_value(out, *iv, true);
        }
      }
      out += '}';
    }
  }
  if (truthy(field(value, "nullable"))) {
    comma();
    out += "nullable:true";
  }
  if (type == "OBJECT") {
    const json* props = field(value, "properties");
    if (props && props->is_object()) {
      comma();
      out += "properties:{";
      format_parameters(out, *props, false);
      out += '}';
    } else if (value.is_object()) {
      comma();
      out += "properties:{";
      format_parameters(out, value, true);
      out += '}';
    }
    if (truthy(field(value, "required"))) {
      comma();
      out += "required:";
      quoted_list(out, field(value, "required"));
    }
  }
  comma();
  out.append("type:").append(kToolQuote).append(type).append(kToolQuote).append("}");
}

void format_parameters(std::string& out, const json& properties, bool filter_keys) {
  static const char* standard[] = {"description", "type", "properties", "required", "nullable"};
  bool first = true;
  for (const auto& [key, value] : dictsort(properties)) {
    if (filter_keys && std::find(std::begin(standard), std::end(standard), key) != std::end(standard)) continue;
    if (!first) out += ',';
    first = false;
    format_parameter(out, key, *value);
  }
}

std::string format_declaration(const json& tool, size_t index) {
  const json& fn = field(tool, "function") ? tool["function"] : tool;
  if (!fn.is_object() || !field(fn, "name") || !fn["name"].is_string())
    throw Error("tools[" + std::to_string(index) + "]: a function declaration needs a string \"name\"");
  std::string out = "declaration:" + fn["name"].get<std::string>() + "{description:";
  out.append(kToolQuote).append(text_of(field(fn, "description"))).append(kToolQuote);
  const json* params = field(fn, "parameters");
  if (truthy(params)) {
    out += ",parameters:{";
    if (truthy(field(*params, "properties"))) {
      out += "properties:{";
      format_parameters(out, (*params)["properties"], false);
      out += "},";
    }
    if (truthy(field(*params, "required"))) {
      out += "required:";
      quoted_list(out, field(*params, "required"));
      out += ',';
    }
    if (truthy(field(*params, "type")))
      out.append("type:").append(kToolQuote).append(type_upper(*params)).append(kToolQuote).append("}");
  }
  if (const json* response = field(fn, "response")) {
    out += ",response:{";
    if (truthy(field(*response, "description")))
      out.append("description:").append(kToolQuote).append(text_of(field(*response, "description"))).append(kToolQuote).append(",");
    if (type_upper(*response) == "OBJECT") out.append("type:").append(kToolQuote).append("OBJECT").append(kToolQuote).append("}");
  }
  out += '}';
  return trim(out);
}

// An object's members as key:value,... in dictsort order (keys unquoted); nothing for a non-object.
void tool_members(std::string& out, const json& object) {
  bool first = true;
  for (const auto& [k, v] : dictsort(object)) {
    if (!first) out += ',';
    first = false;
    out += k + ":";
    format_tool_value(out, *v, false);
  }
}

void tool_response_block(std::string& out, const std::string& name, const json& response) {
  out += "<|tool_response>response:" + name + "{";
  if (response.is_object()) {
    tool_members(out, response);
  } else {
    out += "value:";
    format_tool_value(out, response, false);
  }
  out += "}<tool_response|>";
}

void media_placeholder(std::string& out, const std::string& type) {
  if (type == "image" || type == "image_url") out += "<|image|>";
  else if (type == "audio" || type == "input_audio") out += "<|audio|>";
  else if (type == "video") out += "<|video|>";
}

std::string role_of(const json& m, size_t index) {
  const json* r = field(m, "role");
  if (!m.is_object() || !r || !r->is_string())
    throw Error("messages[" + std::to_string(index) + "]: a message needs a string \"role\"");
  return r->get<std::string>();
}

// Tool-call arguments must be an object; OpenAI clients send a JSON string, which is decoded.
json call_arguments(const json& fn, const std::string& where) {
  const json* args = field(fn, "arguments");
  if (!args || args->is_null() || args->is_object()) return args ? *args : json();
  if (args->is_string()) {
    json parsed = json::parse(args->get<std::string>(), nullptr, false);
    if (!parsed.is_discarded() && (parsed.is_object() || parsed.is_null())) return parsed;
  }
  throw Error(where + ".function.arguments must be a JSON object (or a string holding one)");
}

// The tool results that follow an assistant turn as role "tool" messages, named by the call
// whose id they answer.
std::string tool_message_name(const json& follow, const json& tool_calls) {
  std::string name = truthy(field(follow, "name")) ? text_of(field(follow, "name")) : "unknown";
  const json* follow_id = field(follow, "tool_call_id");
  for (const auto& tc : tool_calls) {
    const json* tc_id = field(tc, "id");
    const bool same = (!tc_id || tc_id->is_null()) ? (!follow_id || follow_id->is_null())
                                                    : (follow_id && *tc_id == *follow_id);
    if (same && field(tc, "function") && field(tc["function"], "name")) name = text_of(&tc["function"]["name"]);
  }
  return name;
}

// A role "tool" message as a response block; media parts leave their placeholders after it.
void tool_message_block(std::string& out, const std::string& name, const json& follow) {
  const json* body = field(follow, "content");
  if (body && body->is_array()) {
    std::string text;
    for (const auto& part : *body)
      if (text_of(field(part, "type")) == "text") text += text_of(field(part, "text"));
    tool_response_block(out, name, text);
    for (const auto& part : *body) media_placeholder(out, text_of(field(part, "type")));
  } else {
    tool_response_block(out, name, body ? *body : json());
  }
}

// A message's content as the template writes it: trimmed text (the model's with its thinking
// stripped), media parts as placeholders.
std::string message_content(const json& m, const std::string& role, const std::string& where) {
  std::string captured;
  const json* content = field(m, "content");
  if (content && content->is_string()) {
    captured = role == "model" ? strip_thinking(content->get<std::string>()) : trim(content->get<std::string>());
  } else if (content && content->is_array()) {
    for (const auto& part : *content) {
      const std::string type = text_of(field(part, "type"));
      if (type == "text") {
        const std::string t = text_of(field(part, "text"));
        captured += role == "model" ? strip_thinking(t) : trim(t);
      } else {
        media_placeholder(captured, type);
      }
    }
  } else if (content && !content->is_null()) {
    throw Error(where + ".content must be a string, a list of parts or null");
  }
  return captured;
}

// One rendering of the template; the fields are the template's loop state.
class ChatRenderer {
 public:
  ChatRenderer(const json& messages, const json& tools, const ChatOptions& opt)
      : messages_(messages), tools_(tools), opt_(opt), out_(opt.bos_token) {}

  std::string render() {
    system_turn();
    for (size_t i = first_; i < messages_.size(); ++i) {
      loop_.push_back(&messages_[i]);
      roles_.push_back(role_of(messages_[i], i));
    }
    for (size_t i = 0; i < loop_.size(); ++i)
      if (roles_[i] == "user") last_user_ = long(i);
    for (size_t i = 0; i < loop_.size(); ++i)
      if (roles_[i] != "tool") message(i);  // tool messages are written inside the assistant turn that called them
    generation_prompt();
    return std::move(out_);
  }

 private:
  // Thinking switch, a leading system/developer message and the tool declarations.
  void system_turn() {
    const bool has_tools = tools_.is_array() && !tools_.empty();
    const bool system_first =
        !messages_.empty() && (role_of(messages_[0], 0) == "system" || role_of(messages_[0], 0) == "developer");
    if (!opt_.enable_thinking && !has_tools && !system_first) return;
    out_ += "<|turn>system\n";
    if (opt_.enable_thinking) {
      out_ += "<|think|>\n";
      prev_type_ = "think";
    }
    if (system_first) {
      const json* content = field(messages_[0], "content");
      if (content && content->is_string()) {
        out_ += trim(content->get<std::string>());
      } else if (content && content->is_array()) {
        for (const auto& part : *content) out_ += trim(text_of(field(part, "text"))) + " ";
      }
      first_ = 1;
    }
    if (has_tools) {
      for (size_t i = 0; i < tools_.size(); ++i) out_ += "<|tool>" + format_declaration(tools_[i], i) + "<tool|>";
      prev_type_ = "tool";
    }
    out_ += "<turn|>\n";
  }

  void message(size_t i) {
    const json& m = *loop_[i];
    const std::string where = "messages[" + std::to_string(i + first_) + "]";
    prev_type_.clear();
    const std::string role = roles_[i] == "assistant" ? "model" : roles_[i];
    const bool continue_same_turn = role == "model" && prev_non_tool_role_ == "assistant";
    if (!continue_same_turn) out_ += "<|turn>" + role + "\n";

    const json* thinking = truthy(field(m, "reasoning")) ? field(m, "reasoning") : field(m, "reasoning_content");
    const json* tool_calls = field(m, "tool_calls");
    const bool has_calls = truthy(tool_calls) && tool_calls->is_array();
    if (truthy(thinking) && (long(i) > last_user_ || (opt_.preserve_thinking && has_calls)))
      out_ += "<|channel>thought\n" + text_of(thinking) + "\n<channel|>";
    if (has_calls) write_tool_calls(*tool_calls, where);
    const bool wrote_responses = write_tool_responses(i, m, has_calls ? tool_calls : nullptr);

    const std::string captured = message_content(m, role, where);
    out_ += captured;
    end_turn(i, role, has_calls, wrote_responses, !trim(captured).empty());
    prev_non_tool_role_ = roles_[i];
  }

  void write_tool_calls(const json& tool_calls, const std::string& where) {
    for (size_t c = 0; c < tool_calls.size(); ++c) {
      const json& call = tool_calls[c];
      const std::string cwhere = where + ".tool_calls[" + std::to_string(c) + "]";
      const json* fn = field(call, "function");
      if (!fn || !field(*fn, "name") || !(*fn)["name"].is_string()) throw Error(cwhere + ": needs function.name");
      out_ += "<|tool_call>call:" + (*fn)["name"].get<std::string>() + "{";
      tool_members(out_, call_arguments(*fn, cwhere));
      out_ += "}<tool_call|>";
    }
    prev_type_ = "tool_call";
  }

  // The message's own tool_responses, else (after tool calls) the role "tool" messages that
  // follow it. Returns whether any response was written.
  bool write_tool_responses(size_t i, const json& m, const json* tool_calls) {
    bool wrote = false;
    const json* responses = field(m, "tool_responses");
    if (truthy(responses) && responses->is_array()) {
      for (const auto& r : *responses) {
        const std::string name = truthy(field(r, "name")) ? text_of(field(r, "name")) : "unknown";
        tool_response_block(out_, name, field(r, "response") ? r["response"] : json());
        wrote = true;
        prev_type_ = "tool_response";
      }
    } else if (tool_calls) {
      for (size_t k = i + 1; k < loop_.size() && roles_[k] == "tool"; ++k) {
        tool_message_block(out_, tool_message_name(*loop_[k], *tool_calls), *loop_[k]);
        wrote = true;
        prev_type_ = "tool_response";
      }
    }
    return wrote;
  }

  void end_turn(size_t i, const std::string& role, bool has_calls, bool wrote_responses, bool has_content) {
    std::string next_role;
    bool next_found = false;
    for (size_t j = i + 1; j < loop_.size() && !next_found; ++j)
      if (roles_[j] != "tool") next_role = roles_[j], next_found = true;
    const bool continues_into_next = role == "model" && next_role == "assistant" && (!has_calls || wrote_responses);

    if (prev_type_ == "tool_call" && !wrote_responses) {
      out_ += "<|tool_response>";  // the model's turn ends awaiting the tool's answer
    } else if (continues_into_next) {
    } else if (!(wrote_responses && !has_content && !next_found)) {
      out_ += "<turn|>\n";
    }
  }

  void generation_prompt() {
    if (!opt_.add_generation_prompt) return;
    if (prev_type_ != "tool_response" && prev_type_ != "tool_call") {
      out_ += "<|turn>model\n";
      if (opt_.empty_thought_when_not_thinking && !opt_.enable_thinking) out_ += "<|channel>thought\n<channel|>";
    } else if (prev_type_ == "tool_response" && opt_.enable_thinking) {
      out_ += "<|channel>thought\n";
    }
  }

  const json& messages_;
  const json& tools_;
  const ChatOptions& opt_;
  std::string out_;
  std::string prev_type_;  // the template's ns.prev_message_type ("" = None)
  std::string prev_non_tool_role_;
  size_t first_ = 0;  // messages[0] went into the system turn: 1
  std::vector<const json*> loop_;  // the messages after the system turn, and their roles
  std::vector<std::string> roles_;
  long last_user_ = -1;  // index in loop_ of the last user message
};

}  // namespace

ChatOptions chat_options_for(const Vocabulary& vocab) {
  ChatOptions o;
  auto bos = vocab.named_piece("bos_token");
  if (!bos) throw Error(vocab.source() + ": no bos_token named in the tokenizer files; the chat template needs it");
  o.bos_token = *bos;
  return o;
}

std::string render_chat(const json& messages, const json& tools, const ChatOptions& opt) {
  if (!messages.is_array()) throw Error("messages must be a JSON array");
  if (!tools.is_null() && !tools.is_array()) throw Error("tools must be a JSON array");
  return ChatRenderer(messages, tools, opt).render();
}

std::vector<std::string> missing_template_tokens(const Vocabulary& vocab) {
  std::vector<std::string> missing;
  const auto& added = vocab.added_token_ids();
  for (const char* t : kTemplateTokens) {
    const int32_t id = vocab.find(t);
    if (id < 0 || std::find(added.begin(), added.end(), id) == added.end()) missing.push_back(t);
  }
  return missing;
}

std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const json& messages, const json& tools, ChatOptions options) {
  const Vocabulary& vocab = tokenizer.vocab();
  const auto missing = missing_template_tokens(vocab);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : " ") + m;
    throw Error(vocab.source() + " lacks the Gemma 4 chat template tokens " + list +
                " (a Gemma 3 tokenizer?); they would be tokenized as plain text");
  }
  const auto bos = tokenizer.bos_id();
  if (!bos) throw Error(vocab.source() + ": no bos_token named in the tokenizer files; the chat template needs it");
  options.bos_token = std::string(vocab.piece(*bos));
  const std::vector<int32_t> ids = tokenizer.encode(render_chat(messages, tools, options));
  if (ids.empty() || ids[0] != *bos) throw Error("chat prompt does not start with the bos token");
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i] == *bos)
      throw Error("chat prompt has a second bos token at position " + std::to_string(i) +
                  " (\"" + options.bos_token + "\" typed in a message?)");
  return ids;
}

}  // namespace g4::text
