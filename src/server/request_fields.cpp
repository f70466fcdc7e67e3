#include "server/request_fields.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "engine/grammar.h"
#include "engine/json_schema_grammar.h"
#include "media/image_token_budget.h"
#include "platform/error.h"

namespace g4::server {

std::string type_name(const RequestJson& v) {
  switch (v.type()) {
    case RequestJson::value_t::null: return "null";
    case RequestJson::value_t::boolean: return "a boolean";
    case RequestJson::value_t::string: return "a string";
    case RequestJson::value_t::array: return "an array";
    case RequestJson::value_t::object: return "an object";
    case RequestJson::value_t::number_float: return "a number";
    case RequestJson::value_t::number_integer:
    case RequestJson::value_t::number_unsigned: return "an integer";
    default: return "an unsupported value";
  }
}

ApiError wrong_type(const std::string& field, const std::string& want, const RequestJson& got) {
  return bad_request("'" + field + "' must be " + want + ", got " + type_name(got), field, "invalid_type");
}

const RequestJson* Reader::find(const char* key) const {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool Reader::fail(ApiError e) {
  if (!error) error = std::move(e);
  return false;
}

bool Reader::number(const char* key, double lo, double hi, double& out) {
  const RequestJson* v = find(key);
  if (!v) return false;
  if (!v->is_number()) return fail(wrong_type(key, "a number", *v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    return fail(bad_request("'" + std::string(key) + "' is " + v->dump() + "; it must be between " + RequestJson(lo).dump() +
                                " and " + RequestJson(hi).dump(),
                            key, "invalid_value"));
  out = x;
  return true;
}

bool Reader::integer(const char* key, int64_t lo, int64_t hi, int64_t& out) {
  const RequestJson* v = find(key);
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

bool Reader::boolean(const char* key, bool& out) {
  const RequestJson* v = find(key);
  if (!v) return false;
  if (!v->is_boolean()) return fail(wrong_type(key, "a boolean", *v));
  out = v->get<bool>();
  return true;
}

namespace {

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

// response_format.json_schema -> s.grammar; false after an error.
bool read_json_schema_format(Reader& r, const RequestJson& rf, GenerationSpec& s) {
  const RequestJson* js = rf.contains("json_schema") ? &rf["json_schema"] : nullptr;
  if (!js || !js->is_object() || !js->contains("name") || !(*js)["name"].is_string())
    return r.fail(bad_request("'response_format.json_schema' must be an object with a 'name' and a 'schema'",
                              "response_format.json_schema", "invalid_value"));
  for (auto it = js->begin(); it != js->end(); ++it)
    if (it.key() != "name" && it.key() != "schema" && it.key() != "strict" && it.key() != "description")
      return r.fail(bad_request("'response_format.json_schema." + it.key() + "' is not supported",
                                "response_format.json_schema." + it.key(), "unsupported_parameter"));
  if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null())
    return r.fail(wrong_type("response_format.json_schema.strict", "a boolean", (*js)["strict"]));
  const RequestJson schema = js->contains("schema") ? (*js)["schema"] : RequestJson::object();
  try {
    s.grammar = grammar::json_schema_gbnf(schema);
  } catch (const grammar::SchemaError& e) {
    return r.fail(bad_request(std::string(e.what()),
                              "response_format.json_schema.schema" + (e.path().empty() ? "" : "." + e.path()),
                              "unsupported_schema"));
  } catch (const Error& e) {
    return r.fail(bad_request(std::string("response_format.json_schema.schema: ") + e.what(),
                              "response_format.json_schema.schema", "invalid_schema"));
  }
  s.grammar_source = "response_format.json_schema";
  return true;
}

// response_format (text | json_object | json_schema); false after an error.
bool read_response_format(Reader& r, GenerationSpec& s) {
  const RequestJson* rf = r.find("response_format");
  if (!rf) return true;
  if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
    return r.fail(bad_request("'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}",
                              "response_format", "invalid_value"));
  const std::string type = (*rf)["type"];
  if (type == "json_object") {
    s.grammar = grammar::json_object_gbnf();
    s.grammar_source = "response_format.json_object";
  } else if (type == "json_schema") {
    return read_json_schema_format(r, *rf, s);
  } else if (type != "text") {
    return r.fail(bad_request("'response_format.type' is \"" + type + "\"; expected text, json_object or json_schema",
                              "response_format.type", "invalid_value"));
  }
  return true;
}

// The `grammar` extension: GBNF text, checked by parsing it.
void read_grammar(Reader& r, GenerationSpec& s) {
  const RequestJson* g = r.find("grammar");
  if (!g) return;
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

// response_format (text | json_object | json_schema) and the `grammar` extension (GBNF text):
// both become the GBNF that constrains decoding; a schema keyword g4 cannot honour is a 400
// naming its path.
void read_output_constraint(Reader& r, GenerationSpec& s) {
  if (!read_response_format(r, s)) return;
  read_grammar(r, s);
}

// model: required, and it must be the served one; false after an error.
bool read_model(Reader& r, GenerationSpec& s, const RequestLimits& limits) {
  const RequestJson* model = r.find("model");
  if (!model)
    return r.fail(bad_request("you must provide a model parameter ('model': \"" + limits.model_name + "\")", "model",
                              "missing_required_field"));
  if (!model->is_string()) return r.fail(wrong_type("model", "a string", *model));
  s.model = model->get<std::string>();
  if (s.model != limits.model_name)
    return r.fail(ApiError{404, "the model '" + s.model + "' does not exist; this server serves '" + limits.model_name + "'",
                           "invalid_request_error", "model", "model_not_found"});
  return true;
}

// The numeric sampling fields, n and the token budget.
void read_sampling(Reader& r, GenerationSpec& s, const RequestLimits& limits) {
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
}

// stop: a string or up to 16 non-empty strings.
void read_stop(Reader& r, SamplingParams& p) {
  const RequestJson* stop = r.find("stop");
  if (!stop) return;
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

// logit_bias: {"token id": bias in [-100, 100]}.
void read_logit_bias(Reader& r, SamplingParams& p, const RequestLimits& limits) {
  const RequestJson* bias = r.find("logit_bias");
  if (!bias) return;
  if (!bias->is_object()) {
    r.fail(wrong_type("logit_bias", "an object mapping token ids to numbers", *bias));
    return;
  }
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

// stream and stream_options.include_usage.
void read_streaming(Reader& r, GenerationSpec& s) {
  r.boolean("stream", s.stream);
  const RequestJson* so = r.find("stream_options");
  if (!so) return;
  if (!so->is_object()) {
    r.fail(wrong_type("stream_options", "an object", *so));
  } else if (auto it = so->find("include_usage"); it != so->end() && !it->is_null()) {
    if (!it->is_boolean()) r.fail(wrong_type("stream_options.include_usage", "a boolean", *it));
    else s.include_usage = it->get<bool>();
  }
  if (!s.stream && !r.error) r.fail(bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options"));
}

// g4 extension: {"g4": {"deadline_ms": N, "speculative": "off"|"ngram"|"draft", "draft_k": K,
// "max_image_tokens": B}}; max_image_tokens is the budget of image parts whose detail is auto.
// deadline_ms lowers the server's per-request deadline; speculative and draft_k choose this
// request's drafting (the engine refuses a drafter it lacks or K above its --draft-k). Any other
// key is refused, never ignored.
void read_g4_extension(Reader& r, GenerationSpec& s, const RequestLimits& limits) {
  const RequestJson* ext = r.find("g4");
  if (!ext) return;
  if (!ext->is_object()) {
    r.fail(wrong_type("g4", "an object", *ext));
    return;
  }
  for (auto it = ext->begin(); it != ext->end() && !r.error; ++it) {
    const std::string field = "g4." + it.key();
    const RequestJson& v = it.value();
    if (it.key() == "deadline_ms") {
      if (!v.is_number() || v.get<double>() <= 0)
        r.fail(bad_request("'g4.deadline_ms' must be a positive number", field, "invalid_value"));
      else
        s.deadline_seconds = std::min(v.get<double>() / 1000.0, limits.max_deadline_seconds);
    } else if (it.key() == "speculative") {
      const auto mode = v.is_string() ? parse_spec_mode(v.get<std::string>()) : std::nullopt;
      if (!mode) r.fail(bad_request("'g4.speculative' must be \"off\", \"ngram\" or \"draft\"", field, "invalid_value"));
      else s.speculative = mode;
    } else if (it.key() == "draft_k") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 16)
        r.fail(bad_request("'g4.draft_k' must be an integer in 1..16", field, "invalid_value"));
      else s.draft_k = int(v.get<int64_t>());
    } else if (it.key() == "max_image_tokens") {
      try {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1 << 20)
          throw Error("must be an integer");
        media::check_image_token_budget(int(v.get<int64_t>()));
        s.max_image_tokens = int(v.get<int64_t>());
      } catch (const Error& e) {
        r.fail(bad_request("'g4.max_image_tokens': " + std::string(e.what()), field, "invalid_value"));
      }
    } else {
      r.fail(bad_request("'" + field + "' is not a g4 extension field (known: deadline_ms, speculative, draft_k, max_image_tokens)", field,
                         "unsupported_parameter"));
    }
  }
}

std::optional<ApiError> check_known_fields(const RequestJson& body, Endpoint e) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!known_fields(e).count(it.key()))
      return bad_request("'" + it.key() + "' is not supported by this server (g4 refuses request fields it would not honour)",
                         it.key(), "unsupported_parameter");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_common(Reader& r, GenerationSpec& s, Endpoint endpoint, const RequestLimits& limits) {
  if (auto e = check_known_fields(r.body, endpoint)) return e;
  s.endpoint = endpoint;
  if (!read_model(r, s, limits)) return r.error;
  read_sampling(r, s, limits);
  read_stop(r, s.sampling);
  read_logit_bias(r, s.sampling, limits);
  read_streaming(r, s);
  read_output_constraint(r, s);
  read_g4_extension(r, s, limits);
  return r.error;
}

}  // namespace g4::server
