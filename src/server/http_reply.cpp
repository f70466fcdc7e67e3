#include "server/http_reply.h"

#include <httplib.h>

namespace g4::server {

using nlohmann::json;

thread_local RequestRecord t_record;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e));
  if (e.status == 429) res.set_header("Retry-After", "1");
  if (e.status == 503) res.set_header("Retry-After", "5");
  t_record.fields["error"] = e.message;
}

}  // namespace g4::server
