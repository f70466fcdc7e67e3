#include "server/image_parts.h"

#include "platform/base64.h"
#include "platform/error.h"

namespace g4::server {

std::optional<int> budget_of_detail(std::string_view detail) {
  if (detail == "low") return 70;
  if (detail == "high") return 1120;
  if (detail == "auto") return 0;
  return std::nullopt;
}

namespace {

ApiError invalid(const std::string& message, const std::string& param) {
  return bad_request(message, param, "invalid_value");
}

std::optional<ApiError> read_detail(const RequestJson& v, const std::string& field, ImagePart& p) {
  const auto budget = v.is_string() ? budget_of_detail(v.get<std::string>()) : std::nullopt;
  if (!budget) return invalid("'" + field + "' must be \"low\", \"high\" or \"auto\"", field);
  p.budget = *budget;
  return std::nullopt;
}

std::optional<ApiError> read_url(const RequestJson& v, const std::string& field, ImagePart& p) {
  if (!v.is_string() || v.get<std::string>().empty())
    return invalid("'" + field + "' must be a non-empty string (a data: URL or an http(s) URL)", field);
  p.url = v.get<std::string>();
  return std::nullopt;
}

}  // namespace

std::variant<ImagePart, ApiError> read_image_url_part(const RequestJson& part, const std::string& where) {
  ImagePart p;
  p.where = where;
  for (auto it = part.begin(); it != part.end(); ++it)
    if (it.key() != "type" && it.key() != "image_url")
      return bad_request("'" + where + "." + it.key() + "' is not a field of an image_url part (known: type, image_url)",
                         where + "." + it.key(), "unsupported_parameter");
  const auto iu = part.find("image_url");
  if (iu == part.end()) return bad_request("'" + where + ".image_url' is required", where + ".image_url", "missing_required_field");
  if (iu->is_string()) {
    if (auto e = read_url(*iu, where + ".image_url", p)) return *e;
    return p;
  }
  if (!iu->is_object()) return invalid("'" + where + ".image_url' must be an object {\"url\": ...} or a URL string", where + ".image_url");
  for (auto it = iu->begin(); it != iu->end(); ++it) {
    const std::string field = where + ".image_url." + it.key();
    if (it.key() == "url") {
      if (auto e = read_url(it.value(), field, p)) return *e;
    } else if (it.key() == "detail") {
      if (auto e = read_detail(it.value(), field, p)) return *e;
    } else {
      return bad_request("'" + field + "' is not a field of image_url (known: url, detail)", field, "unsupported_parameter");
    }
  }
  if (p.url.empty()) return bad_request("'" + where + ".image_url.url' is required", where + ".image_url.url", "missing_required_field");
  return p;
}

std::variant<ImagePart, ApiError> read_input_image_part(const RequestJson& part, const std::string& where) {
  ImagePart p;
  p.where = where;
  for (auto it = part.begin(); it != part.end(); ++it) {
    const std::string field = where + "." + it.key();
    if (it.key() == "type") continue;
    if (it.key() == "image_url") {
      if (auto e = read_url(it.value(), field, p)) return *e;
    } else if (it.key() == "detail") {
      if (auto e = read_detail(it.value(), field, p)) return *e;
    } else if (it.key() == "file_id") {
      return bad_request("'" + field + "' is not supported: g4 stores no files; send the image as a data: URL in image_url",
                         field, "unsupported_parameter");
    } else {
      return bad_request("'" + field + "' is not a field of an input_image part (known: type, image_url, detail)", field,
                         "unsupported_parameter");
    }
  }
  if (p.url.empty()) return bad_request("'" + where + ".image_url' is required", where + ".image_url", "missing_required_field");
  return p;
}

std::variant<DataUrl, ApiError> parse_data_url(std::string_view url, const std::string& where) {
  const std::string field = where + ".url";
  if (url.substr(0, 5) != "data:") return invalid("'" + field + "' is not a data: URL", field);
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return invalid("'" + field + "': a data: URL needs a ',' before its data", field);
  const std::string_view meta = url.substr(5, comma - 5);
  DataUrl d;
  const size_t semi = meta.find(';');
  d.media_type = std::string(meta.substr(0, semi));
  if (d.media_type.substr(0, 6) != "image/")
    return bad_request("'" + field + "' declares media type \"" + d.media_type +
                           "\"; an image part takes image/png, image/jpeg or image/webp",
                       field, "unsupported_content_type");
  if (semi == std::string_view::npos || meta.substr(semi) != ";base64")
    return invalid("'" + field + "': only base64 data: URLs are accepted (\"data:" + d.media_type + ";base64,...\")", field);
  try {
    d.bytes = base64_decode(url.substr(comma + 1));
  } catch (const Error& e) {
    // Offsets count from the start of the URL, where a client would look.
    return invalid("'" + field + "': " + std::string(e.what()) + " (the data starts at offset " + std::to_string(comma + 1) + ")",
                   field);
  }
  if (d.bytes.empty()) return invalid("'" + field + "': the data: URL holds no bytes", field);
  return d;
}

}  // namespace g4::server
