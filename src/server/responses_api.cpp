#include "server/responses_api.h"

#include <set>

#include "server/image_parts.h"

namespace g4::server {

using nlohmann::json;

void ResponseStore::put(const std::string& id, json conversation) {
  std::lock_guard<std::mutex> l(mu_);
  items_.emplace_back(id, std::move(conversation));
  while (items_.size() > capacity_) items_.pop_front();
}

std::optional<json> ResponseStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = items_.rbegin(); it != items_.rend(); ++it)
    if (it->first == id) return it->second;
  return std::nullopt;
}

namespace {

ApiError unsupported(const std::string& param, const std::string& why) {
  return bad_request("'" + param + "' " + why, param, "unsupported_parameter");
}

// One input item -> chat messages appended to `out` (function calls join the assistant message
// before them when it has only calls).
std::optional<ApiError> add_input_item(const RequestJson& item, size_t i, nlohmann::json& out, const RequestLimits& limits) {
  const std::string where = "input[" + std::to_string(i) + "]";
  if (!item.is_object()) return bad_request("'" + where + "' must be an object", where, "invalid_type");
  const std::string type = item.contains("type") && item["type"].is_string() ? item["type"].get<std::string>() : "message";
  if (type == "message") {
    static const std::set<std::string> kRoles = {"user", "system", "developer", "assistant"};
    if (!item.contains("role") || !item["role"].is_string() || !kRoles.count(item["role"].get<std::string>()))
      return bad_request("'" + where + ".role' must be user, system, developer or assistant", where + ".role", "invalid_value");
    const RequestJson* content = item.contains("content") ? &item["content"] : nullptr;
    // Text parts join into one string; with an input_image among them the content stays a list
    // of chat parts (text and image_url, in order), as the chat template reads it.
    nlohmann::json parts = nlohmann::json::array();
    std::string text;
    bool any_image = false;
    if (content && content->is_string()) {
      text = content->get<std::string>();
    } else if (content && content->is_array()) {
      for (size_t j = 0; j < content->size(); ++j) {
        const RequestJson& part = (*content)[j];
        const std::string pw = where + ".content[" + std::to_string(j) + "]";
        const std::string pt = part.is_object() && part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
        if (pt == "input_image") {
          if (!limits.accepts_images)
            return bad_request("'" + pw + "' is an image, and " + limits.images_refused +
                                   " (an image would be answered without being seen)",
                               pw + ".type", "unsupported_content_type");
          auto img = read_input_image_part(part, pw);
          if (auto* e = std::get_if<ApiError>(&img)) return *e;
          const ImagePart& ip = std::get<ImagePart>(img);
          nlohmann::json iu = {{"url", ip.url}};
          if (part.contains("detail")) iu["detail"] = part["detail"];
          parts.push_back({{"type", "image_url"}, {"image_url", iu}});
          any_image = true;
          continue;
        }
        if (pt != "input_text" && pt != "output_text")
          return bad_request("'" + pw + ".type' is \"" + pt +
                                 "\": g4 accepts input_text, output_text and input_image parts (a file or audio part "
                                 "would be answered without being read or heard)",
                             pw + ".type", "unsupported_content_type");
        if (!part.contains("text") || !part["text"].is_string())
          return bad_request("'" + pw + ".text' must be a string", pw + ".text", "invalid_value");
        text += part["text"].get<std::string>();
        parts.push_back({{"type", "text"}, {"text", part["text"]}});
      }
    } else {
      return bad_request("'" + where + ".content' must be a string or an array of content parts", where + ".content", "invalid_type");
    }
    if (any_image) out.push_back({{"role", item["role"]}, {"content", parts}});
    else out.push_back({{"role", item["role"]}, {"content", text}});
    return std::nullopt;
  }
  if (type == "function_call") {
    for (const char* k : {"call_id", "name", "arguments"})
      if (!item.contains(k) || !item[k].is_string())
        return bad_request("'" + where + "." + k + "' must be a string", where + "." + k, "invalid_value");
    nlohmann::json call = {{"id", item["call_id"]}, {"type", "function"},
                          {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
    if (!out.empty() && out.back()["role"] == "assistant" && out.back().contains("tool_calls"))
      out.back()["tool_calls"].push_back(call);
    else
      out.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", nlohmann::json::array({call})}});
    return std::nullopt;
  }
  if (type == "function_call_output") {
    if (!item.contains("call_id") || !item["call_id"].is_string())
      return bad_request("'" + where + ".call_id' must be a string", where + ".call_id", "invalid_value");
    if (!item.contains("output") || !item["output"].is_string())
      return bad_request("'" + where + ".output' must be a string", where + ".output", "invalid_value");
    out.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", item["output"]}});
    return std::nullopt;
  }
  return bad_request("'" + where + ".type' is \"" + type + "\"; g4 accepts message, function_call and function_call_output items",
                     where + ".type", "unsupported_value");
}

std::variant<RequestJson, ApiError> tools_to_chat(const RequestJson& tools) {
  if (!tools.is_array()) return bad_request("'tools' must be an array", "tools", "invalid_type");
  RequestJson out = RequestJson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const RequestJson& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function")
      return unsupported(where + ".type", "must be \"function\": g4 runs no built-in tools (web or file search, computer use)");
    RequestJson f = {{"name", t.value("name", RequestJson())}};
    if (t.contains("description")) f["description"] = t["description"];
    if (t.contains("parameters")) f["parameters"] = t["parameters"];
    out.push_back({{"type", "function"}, {"function", f}});
  }
  return out;
}

}  // namespace

namespace {

std::optional<ApiError> check_responses_fields(const RequestJson& body) {
  static const std::set<std::string> kKnown = {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p",
                                               "stream", "previous_response_id", "tools", "tool_choice", "text", "store",
                                               "metadata", "user", "parallel_tool_calls"};
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!kKnown.count(it.key()))
      return unsupported(it.key(), "is not supported by g4's /v1/responses (refused rather than ignored)");
  return std::nullopt;
}

// r.conversation: the stored conversation of previous_response_id (or none), then the input.
std::optional<ApiError> read_conversation(const RequestJson& body, const ResponseStore& store, ResponsesRequest& r,
                                          const RequestLimits& limits) {
  if (const auto p = body.find("previous_response_id"); p != body.end() && !p->is_null()) {
    if (!p->is_string()) return bad_request("'previous_response_id' must be a string", "previous_response_id", "invalid_type");
    const auto prev = store.get(p->get<std::string>());
    if (!prev)
      return bad_request("no stored response '" + p->get<std::string>() + "' (g4 keeps the most recent responses in memory)",
                         "previous_response_id", "previous_response_not_found");
    if (prev->is_object() && prev->contains("unusable"))
      return bad_request("stored response '" + p->get<std::string>() + "' cannot be continued: " +
                             (*prev)["unusable"].get<std::string>() + "; send the conversation as input instead",
                         "previous_response_id", "previous_response_unusable");
    r.previous_response_id = p->get<std::string>();
    r.conversation = *prev;
  } else {
    r.conversation = nlohmann::json::array();
  }
  const auto input = body.find("input");
  if (input == body.end()) return bad_request("'input' is required", "input", "missing_required_field");
  if (input->is_string()) {
    r.conversation.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (size_t i = 0; i < input->size(); ++i)
      if (auto e = add_input_item((*input)[i], i, r.conversation, limits)) return *e;
  } else {
    return bad_request("'input' must be a string or an array of input items", "input", "invalid_type");
  }
  return std::nullopt;
}

// tools and tool_choice, in the chat request's form.
std::optional<ApiError> tool_fields_to_chat(const RequestJson& body, RequestJson& chat) {
  if (const auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    auto tools = tools_to_chat(*t);
    if (auto* e = std::get_if<ApiError>(&tools)) return *e;
    chat["tools"] = std::get<RequestJson>(tools);
  }
  if (const auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (tc->is_string()) {
      chat["tool_choice"] = *tc;
    } else if (tc->is_object() && tc->value("type", "") == "function" && tc->contains("name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*tc)["name"]}}}};
    } else {
      return unsupported("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
    }
  }
  return std::nullopt;
}

// text.format -> response_format.
std::optional<ApiError> text_format_to_chat(const RequestJson& body, RequestJson& chat) {
  const auto text = body.find("text");
  if (text == body.end() || text->is_null()) return std::nullopt;
  if (!text->is_object()) return bad_request("'text' must be an object", "text", "invalid_type");
  for (auto it = text->begin(); it != text->end(); ++it)
    if (it.key() != "format") return unsupported("text." + it.key(), "is not supported by g4 (refused rather than ignored)");
  if (const auto f = text->find("format"); f != text->end() && !f->is_null()) {
    const std::string type = f->is_object() ? f->value("type", "") : "";
    if (type == "text" || type == "json_object") {
      chat["response_format"] = {{"type", type}};
    } else if (type == "json_schema") {
      RequestJson js = {{"name", f->value("name", "response")}, {"schema", f->value("schema", RequestJson::object())}};
      for (const char* k : {"strict", "description"})
        if (f->contains(k)) js[k] = (*f)[k];
      chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
    } else {
      return bad_request("'text.format.type' must be text, json_object or json_schema", "text.format.type", "invalid_value");
    }
  }
  return std::nullopt;
}

// store, stream and metadata: what the server does with the response, not what it generates.
std::optional<ApiError> read_response_handling(const RequestJson& body, ResponsesRequest& r) {
  if (const auto s = body.find("store"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad_request("'store' must be a boolean", "store", "invalid_type");
    r.store = s->get<bool>();
  }
  if (const auto s = body.find("stream"); s != body.end() && !s->is_null()) {
    if (!s->is_boolean()) return bad_request("'stream' must be a boolean", "stream", "invalid_type");
    r.stream = s->get<bool>();
  }
  if (const auto m = body.find("metadata"); m != body.end() && !m->is_null() && !m->is_object())
    return bad_request("'metadata' must be an object", "metadata", "invalid_type");
  return std::nullopt;
}

// The request fields the response object repeats, with OpenAI's defaults.
RequestJson echoed_fields(const RequestJson& body, const ResponsesRequest& r) {
  return {{"instructions", body.value("instructions", RequestJson())},
          {"metadata", body.value("metadata", RequestJson::object())},
          {"max_output_tokens", body.value("max_output_tokens", RequestJson())},
          {"temperature", body.value("temperature", RequestJson(1.0))},
          {"top_p", body.value("top_p", RequestJson(1.0))},
          {"tool_choice", body.value("tool_choice", RequestJson("auto"))},
          {"tools", body.value("tools", RequestJson::array())},
          {"parallel_tool_calls", body.value("parallel_tool_calls", RequestJson(true))},
          {"previous_response_id", r.previous_response_id.empty() ? RequestJson() : RequestJson(r.previous_response_id)},
          {"store", r.store},
          {"text", body.value("text", RequestJson{{"format", {{"type", "text"}}}})}};
}

}  // namespace

std::variant<ResponsesRequest, ApiError> responses_to_chat(const RequestJson& body, const ResponseStore& store,
                                                         const RequestLimits& limits) {
  if (auto e = check_responses_fields(body)) return *e;
  ResponsesRequest r;
  RequestJson chat = {{"model", body.contains("model") ? body["model"] : RequestJson()}};
  if (auto e = read_conversation(body, store, r, limits)) return *e;
  RequestJson messages = RequestJson::array();
  if (const auto ins = body.find("instructions"); ins != body.end() && !ins->is_null()) {
    if (!ins->is_string()) return bad_request("'instructions' must be a string", "instructions", "invalid_type");
    messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  for (const auto& m : r.conversation) messages.push_back(RequestJson(m));
  chat["messages"] = messages;
  if (const auto m = body.find("max_output_tokens"); m != body.end() && !m->is_null()) chat["max_tokens"] = *m;
  for (const char* k : {"temperature", "top_p", "user", "parallel_tool_calls"})
    if (const auto v = body.find(k); v != body.end() && !v->is_null()) chat[k] = *v;
  if (auto e = tool_fields_to_chat(body, chat)) return *e;
  if (auto e = text_format_to_chat(body, chat)) return *e;
  if (auto e = read_response_handling(body, r)) return *e;
  r.echo = echoed_fields(body, r);
  r.chat_body = std::move(chat);
  return r;
}

ApiError responses_error(ApiError e) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"max_tokens", "max_output_tokens"}, {"response_format.json_schema", "text.format"},
      {"response_format", "text.format"}, {"messages", "input"}};
  for (const auto& [chat, responses] : kNames) {
    const std::string from = chat;
    if (e.param.rfind(from, 0) != 0) continue;
    const std::string to = responses + e.param.substr(from.size());
    for (size_t at; (at = e.message.find("'" + e.param)) != std::string::npos;) e.message.replace(at + 1, e.param.size(), to);
    e.param = to;
    break;
  }
  return e;
}

std::string sse_named_event(const std::string& type, const json& payload) {
  return "event: " + type + "\ndata: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

ResponsesBuilder::ResponsesBuilder(std::string id, std::string model, int64_t created, json echo)
    : id_(std::move(id)), model_(std::move(model)), created_(created), echo_(std::move(echo)) {
  message_id_ = "msg_" + id_.substr(id_.find('_') + 1);
}

ResponsesBuilder::Event ResponsesBuilder::event(const std::string& type, json payload) {
  payload["type"] = type;
  payload["sequence_number"] = seq_++;
  return {type, std::move(payload)};
}

json ResponsesBuilder::shell(const std::string& status) const {
  json r = {{"id", id_},          {"object", "response"}, {"created_at", created_}, {"status", status}, {"model", model_},
            {"output", json::array()}, {"error", nullptr},    {"incomplete_details", nullptr}, {"usage", nullptr}};
  for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
  return r;
}

std::vector<ResponsesBuilder::Event> ResponsesBuilder::opening() {
  return {event("response.created", {{"response", shell("in_progress")}}),
          event("response.in_progress", {{"response", shell("in_progress")}})};
}

namespace {

json message_item(const std::string& id, const std::string& status, const json& content) {
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", content}};
}
json text_part(const std::string& text) { return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}; }

// The chat result's parts: text, reasoning, calls (chat format), finish reason.
struct ChatResult {
  std::string text, reasoning;
  json calls = json::array();
  std::string finish_reason;
  json usage, g4;
};
ChatResult chat_result(const ChoiceResponses& chat) {
  const json r = chat.final_response();
  const json& choice = r["choices"][0];
  ChatResult c;
  const json& msg = choice["message"];
  if (msg.contains("content") && msg["content"].is_string()) c.text = msg["content"];
  if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string()) c.reasoning = msg["reasoning_content"];
  if (msg.contains("tool_calls")) c.calls = msg["tool_calls"];
  c.finish_reason = choice["finish_reason"];
  c.usage = r["usage"];
  c.g4 = r["g4"];
  return c;
}
json function_call_item(const json& call, const std::string& status, bool with_arguments) {
  const std::string call_id = call["id"];
  return {{"id", "fc_" + call_id.substr(call_id.find('_') + 1)},
          {"type", "function_call"},
          {"status", status},
          {"call_id", call_id},
          {"name", call["function"]["name"]},
          {"arguments", with_arguments ? call["function"]["arguments"] : json("")}};
}

}  // namespace

std::vector<ResponsesBuilder::Event> ResponsesBuilder::on_chat_chunks(const std::vector<json>& chunks) {
  std::vector<Event> out;
  for (const json& c : chunks) {
    if (!c.contains("choices") || c["choices"].empty()) continue;
    const json& delta = c["choices"][0].value("delta", json::object());
    if (!delta.contains("content") || !delta["content"].is_string() || delta["content"].get<std::string>().empty()) continue;
    if (!message_open_) {
      message_open_ = true;
      out.push_back(event("response.output_item.added",
                          {{"output_index", output_index_}, {"item", message_item(message_id_, "in_progress", json::array())}}));
      out.push_back(event("response.content_part.added",
                          {{"item_id", message_id_}, {"output_index", output_index_}, {"content_index", 0}, {"part", text_part("")}}));
    }
    const std::string piece = delta["content"];
    text_ += piece;
    out.push_back(event("response.output_text.delta",
                        {{"item_id", message_id_}, {"output_index", output_index_}, {"content_index", 0}, {"delta", piece}}));
  }
  return out;
}

json ResponsesBuilder::final_object(const ChoiceResponses& chat) const {
  const ChatResult c = chat_result(chat);
  const bool incomplete = c.finish_reason == "length";
  json r = shell(incomplete ? "incomplete" : "completed");
  if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (!c.text.empty() || c.calls.empty())
    r["output"].push_back(message_item(message_id_, incomplete ? "incomplete" : "completed", json::array({text_part(c.text)})));
  if (!c.reasoning.empty())
    r["output"].push_back({{"id", "rs_" + id_.substr(id_.find('_') + 1)},
                           {"type", "reasoning"},
                           {"summary", json::array()},
                           {"content", json::array({{{"type", "reasoning_text"}, {"text", c.reasoning}}})}});
  // A call cut by max_output_tokens carries its partial arguments, as an incomplete item.
  for (const json& call : c.calls) r["output"].push_back(function_call_item(call, incomplete ? "incomplete" : "completed", true));
  const int64_t in = c.usage["prompt_tokens"], outt = c.usage["completion_tokens"];
  r["usage"] = {{"input_tokens", in},
                {"input_tokens_details", {{"cached_tokens", c.usage["prompt_tokens_details"]["cached_tokens"]}}},
                {"output_tokens", outt},
                {"output_tokens_details", {{"reasoning_tokens", 0}}},
                {"total_tokens", in + outt}};
  if (c.usage["prompt_tokens_details"].contains("image_tokens"))
    r["usage"]["input_tokens_details"]["image_tokens"] = c.usage["prompt_tokens_details"]["image_tokens"];
  r["g4"] = c.g4;
  return r;
}

std::vector<ResponsesBuilder::Event> ResponsesBuilder::finish(const ChoiceResponses& chat) {
  std::vector<Event> out;
  const json final = final_object(chat);
  const ChatResult c = chat_result(chat);
  const std::string status = final["status"];
  // The items in the final object's order; the message was opened by its first delta (or now,
  // empty, when there is neither text nor a call).
  if (!message_open_ && c.calls.empty()) {
    message_open_ = true;
    out.push_back(event("response.output_item.added",
                        {{"output_index", output_index_}, {"item", message_item(message_id_, "in_progress", json::array())}}));
    out.push_back(event("response.content_part.added",
                        {{"item_id", message_id_}, {"output_index", output_index_}, {"content_index", 0}, {"part", text_part("")}}));
  }
  if (message_open_) {
    out.push_back(event("response.output_text.done",
                        {{"item_id", message_id_}, {"output_index", output_index_}, {"content_index", 0}, {"text", c.text}}));
    out.push_back(event("response.content_part.done",
                        {{"item_id", message_id_}, {"output_index", output_index_}, {"content_index", 0}, {"part", text_part(c.text)}}));
    out.push_back(event("response.output_item.done", {{"output_index", output_index_}, {"item", final["output"][0]}}));
    ++output_index_;
  }
  for (size_t k = size_t(output_index_); k < final["output"].size(); ++k, ++output_index_) {
    const json& item = final["output"][k];
    if (item["type"] == "function_call") {
      json added = item;
      added["status"] = "in_progress";
      added["arguments"] = "";
      out.push_back(event("response.output_item.added", {{"output_index", output_index_}, {"item", added}}));
      out.push_back(event("response.function_call_arguments.delta",
                          {{"item_id", item["id"]}, {"output_index", output_index_}, {"delta", item["arguments"]}}));
      out.push_back(event("response.function_call_arguments.done",
                          {{"item_id", item["id"]}, {"output_index", output_index_}, {"arguments", item["arguments"]}}));
    } else {
      out.push_back(event("response.output_item.added", {{"output_index", output_index_}, {"item", item}}));
    }
    out.push_back(event("response.output_item.done", {{"output_index", output_index_}, {"item", item}}));
  }
  out.push_back(event(status == "incomplete" ? "response.incomplete" : "response.completed", {{"response", final}}));
  return out;
}

json ResponsesBuilder::output_as_messages(const ChoiceResponses& chat) {
  const ChatResult c = chat_result(chat);
  json m = {{"role", "assistant"}, {"content", c.text}};
  if (!c.calls.empty()) {
    json calls = json::array();
    for (const json& call : c.calls)
      calls.push_back({{"id", call["id"]}, {"type", "function"}, {"function", call["function"]}});
    m["tool_calls"] = calls;
    if (c.text.empty()) m["content"] = nullptr;
  }
  return json::array({m});
}

}  // namespace g4::server
