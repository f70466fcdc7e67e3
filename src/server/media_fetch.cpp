#include "server/media_fetch.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>

namespace g4::server {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

ApiError refused(const std::string& message, const std::string& where) {
  return bad_request("'" + where + ".url': " + message, where + ".url", "invalid_image_url");
}

// A Location header against the URL it answered: absolute, or a path on the same origin.
std::optional<UrlParts> resolve(const UrlParts& base, const std::string& location) {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return split_http_url(location);
  if (location.empty() || location[0] != '/' || location.rfind("//", 0) == 0) return std::nullopt;
  UrlParts u = base;
  u.path = location;
  return u;
}

std::string url_of(const UrlParts& u) { return u.scheme + "://" + u.host + ":" + std::to_string(u.port) + u.path; }

}  // namespace

std::optional<UrlParts> split_http_url(std::string_view url) {
  UrlParts u;
  const size_t colon = url.find("://");
  if (colon == std::string_view::npos) return std::nullopt;
  u.scheme = lower(url.substr(0, colon));
  if (u.scheme != "http" && u.scheme != "https") return std::nullopt;
  std::string_view rest = url.substr(colon + 3);
  const size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  u.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (const size_t hash = u.path.find('#'); hash != std::string::npos) u.path.resize(hash);
  if (u.path.empty() || u.path[0] != '/') u.path = "/" + u.path;
  if (authority.empty() || authority.find('@') != std::string_view::npos) return std::nullopt;
  u.port = u.scheme == "https" ? 443 : 80;
  std::string_view host = authority;
  if (authority.front() == '[') {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') return std::nullopt;
  } else if (const size_t c = authority.rfind(':'); c != std::string_view::npos) {
    host = authority.substr(0, c);
    authority = authority.substr(c);
  } else {
    authority = {};
  }
  if (!authority.empty()) {  // ":port"
    const std::string_view digits = authority.substr(1);
    if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
    u.port = std::stoi(std::string(digits));
    if (u.port < 1 || u.port > 65535) return std::nullopt;
  }
  if (host.empty()) return std::nullopt;
  u.host = lower(host);
  return u;
}

bool host_allowed(std::string_view host, const std::vector<std::string>& allowed) {
  const std::string h = lower(host);
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return lower(a) == h; });
}

std::variant<std::string, ApiError> fetch_media(const std::string& url, const MediaFetchOptions& o, const std::string& where) {
  auto parts = split_http_url(url);
  if (!parts) return refused("only data: URLs and absolute http(s) URLs are accepted", where);
  const auto start = std::chrono::steady_clock::now();
  const auto left = [&] {
    return o.timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (int hop = 0;; ++hop) {
    if (!host_allowed(parts->host, o.allowed_hosts))
      return refused((hop == 0 ? "host '" : "redirect to host '") + parts->host +
                         "' is not in the server's --allowed-media-domains" +
                         (o.allowed_hosts.empty() ? " (empty: remote images are off; send a data: URL)" : ""),
                     where);
    if (left() <= 0) return refused("fetching took longer than " + std::to_string(int(o.timeout_s)) + " s", where);
    httplib::Client cli(parts->scheme + "://" + parts->host + ":" + std::to_string(parts->port));
    const auto budget = std::chrono::duration<double>(left());
    cli.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(budget));
    cli.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(budget));
    cli.set_follow_location(false);
    std::string body;
    int status = 0;
    std::string location;
    bool too_big = false, too_slow = false;
    auto res = cli.Get(
        parts->path, httplib::Headers{},
        [&](const httplib::Response& r) {
          status = r.status;
          location = r.get_header_value("Location");
          if (const std::string len = r.get_header_value("Content-Length"); !len.empty() && status == 200) {
            try {
              if (std::stoull(len) > o.max_bytes) too_big = true;
            } catch (...) {
            }
          }
          return !too_big;
        },
        [&](const char* data, size_t n) {
          if (body.size() + n > o.max_bytes) too_big = true;
          if (left() <= 0) too_slow = true;
          if (too_big || too_slow) return false;
          body.append(data, n);
          return true;
        });
    if (too_big) return refused("the image at " + url_of(*parts) + " is larger than " + std::to_string(o.max_bytes) + " bytes", where);
    if (too_slow) return refused("fetching took longer than " + std::to_string(int(o.timeout_s)) + " s", where);
    if (!res) return refused("could not fetch " + url_of(*parts) + ": " + httplib::to_string(res.error()), where);
    if (status == 301 || status == 302 || status == 303 || status == 307 || status == 308) {
      if (hop >= o.max_redirects) return refused("more than " + std::to_string(o.max_redirects) + " redirects", where);
      auto next = resolve(*parts, location);
      if (!next) return refused("a redirect to '" + location + "' that is not an http(s) URL", where);
      parts = next;
      continue;
    }
    if (status != 200) return refused(url_of(*parts) + " answered HTTP " + std::to_string(status), where);
    if (body.empty()) return refused(url_of(*parts) + " sent no bytes", where);
    return body;
  }
}

}  // namespace g4::server
