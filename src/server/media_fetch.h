// Fetching an image part's http(s) URL, only from hosts the operator listed
// (--allowed-media-domains). A server that fetches any URL a client names is a proxy into its own
// network, so the default list is empty and every remote URL is refused. Redirects are followed
// by hand, each target checked against the list; size and time are bounded.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/api_error.h"

namespace g4::server {

struct MediaFetchOptions {
  std::vector<std::string> allowed_hosts;  // exact host names, compared without case
  uint64_t max_bytes = 20u << 20;          // the body, as sent
  double timeout_s = 10;                   // the whole fetch, redirects included
  int max_redirects = 3;
};

struct UrlParts {
  std::string scheme;  // "http" | "https"
  std::string host;    // lower case, no brackets
  int port = 0;
  std::string path;    // "/..." with the query
};

// Splits an absolute http(s) URL; nullopt for anything else (other schemes, user info, a bad port).
std::optional<UrlParts> split_http_url(std::string_view url);

bool host_allowed(std::string_view host, const std::vector<std::string>& allowed);

// The body of `url`, or a 400 naming `where` (the content part) and the reason: host not
// listed, redirect off the list, status, too large, too slow, unreachable.
std::variant<std::string, ApiError> fetch_media(const std::string& url, const MediaFetchOptions& o, const std::string& where);

}  // namespace g4::server
