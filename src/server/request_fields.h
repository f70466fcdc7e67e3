// The request fields /v1/chat/completions and /v1/completions share (model, sampling, stop,
// stream, response_format / grammar, the g4 extension) and the small validation context both
// parsers read them with. Internal to openai_request.cpp and request_fields.cpp.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace g4::server {

// "a string", "an integer", ...: how an error names the type a client sent.
std::string type_name(const RequestJson& v);
// 400 "'FIELD' must be WANT, got TYPE" (code invalid_type).
ApiError wrong_type(const std::string& field, const std::string& want, const RequestJson& got);

// A small validation context: the first error wins; getters return false when the field is absent
// (or null, which OpenAI clients send for "not set").
struct Reader {
  const RequestJson& body;
  std::optional<ApiError> error;

  const RequestJson* find(const char* key) const;
  bool fail(ApiError e);  // records e unless an earlier error was recorded; returns false
  bool number(const char* key, double lo, double hi, double& out);
  bool integer(const char* key, int64_t lo, int64_t hi, int64_t& out);
  bool boolean(const char* key, bool& out);
};

// Reads the fields both endpoints share: model, sampling, stop, stream, seed, n,
// response_format / grammar, g4 extension; a field the endpoint does not know is refused by name
// first (g4 never ignores a field). Returns the first error.
std::optional<ApiError> read_common(Reader& r, GenerationSpec& s, Endpoint endpoint, const RequestLimits& limits);

}  // namespace g4::server
