// An OpenAI-style error: the HTTP status plus the body {"error": {"message", "type", "param", "code"}}.
// Every refusal the server makes is one of these, naming the field and the problem.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace g4::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field ("" -> null)
  std::string code;   // machine-readable code ("" -> null)
};

inline ApiError bad_request(std::string message, std::string param = "", std::string code = "") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

inline nlohmann::json error_body(const ApiError& e) {
  nlohmann::json inner = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) inner["param"] = e.param;
  if (!e.code.empty()) inner["code"] = e.code;
  return {{"error", inner}};
}

}  // namespace g4::server
