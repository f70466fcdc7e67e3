// What every HTTP handler shares: the JSON and error replies, and the record of what a handler
// learned about its request, which the logger callback writes as the request's log line.
// Internal to the http_*.cpp files.
#pragma once
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation_service.h"

namespace httplib {
struct Response;
}

namespace g4::server {

// Log fields of the request this worker thread serves, for the log line the logger callback
// writes after the response (streams included) is sent. Handlers and the logger run on the same
// worker thread.
struct RequestRecord {
  nlohmann::json fields = nlohmann::json::object();
  Clock::time_point start = Clock::now();
};
extern thread_local RequestRecord t_record;

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
// The error body with its status (and Retry-After for 429 and 503); records the message.
void send_error(httplib::Response& res, const ApiError& e);

}  // namespace g4::server
