// Image content parts of a request, as pure parsing: chat's {"type": "image_url", "image_url":
// {"url", "detail"}} and Responses' {"type": "input_image", "image_url", "detail"}, and data:
// URLs. Nothing here decodes pixels or touches the model; the service turns each part into soft
// tokens (image_input.h).
#pragma once
#include <string>
#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace g4::server {

// The soft-token budget OpenAI's `detail` asks for: "low" 70, "high" 1120, "auto" 0 (the
// request's g4.max_image_tokens, else the server's default). Anything else: nullopt.
std::optional<int> budget_of_detail(std::string_view detail);

// A chat content part of type "image_url": `image_url` is {"url": "...", "detail": "..."} or
// the URL string itself; every other key is refused by name.
std::variant<ImagePart, ApiError> read_image_url_part(const RequestJson& part, const std::string& where);

// A Responses content part of type "input_image": "image_url" (a string) and "detail"; a
// "file_id" is refused (g4 stores no files).
std::variant<ImagePart, ApiError> read_input_image_part(const RequestJson& part, const std::string& where);

struct DataUrl {
  std::string media_type;  // as declared ("image/png"); the decoder still reads the magic bytes
  std::string bytes;
};

// "data:image/png;base64,...." -> bytes. Refuses, naming `where`, a media type other than
// image/*, data that is not base64, and bad base64 (with its offset).
std::variant<DataUrl, ApiError> parse_data_url(std::string_view url, const std::string& where);

}  // namespace g4::server
