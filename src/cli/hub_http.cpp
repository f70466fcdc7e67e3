#include "cli/hub_http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstring>

#include "platform/error.h"

namespace g4::cli {
namespace {

struct Headers {
  std::map<std::string, std::string>* out;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* h = static_cast<Headers*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) h->out->clear();  // a new response (after a redirect)
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(value.begin());
    (*h->out)[name] = value;
  }
  return size * n;
}

size_t to_string(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// Writes the body into the part file, or into `error_body` when the reply is an error.
struct Sink {
  CURL* curl;
  FILE* file;
  uint64_t offset;  // bytes already in the file when the transfer started
  uint64_t written = 0, expected = 0;
  bool decided = false, restart = false;
  int write_errno = 0;
  std::string error_body;
  const std::function<void(uint64_t, uint64_t)>* on_bytes;
};

size_t to_file(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 400) {
    s->error_body.append(data, bytes);
    return bytes;
  }
  if (!s->decided) {
    s->decided = true;
    if (status == 200 && s->offset > 0) {  // the range was ignored: start the file over
      s->restart = true;
      s->offset = 0;
      if (std::fflush(s->file) != 0 || ftruncate(fileno(s->file), 0) != 0 || std::fseek(s->file, 0, SEEK_SET) != 0) {
        s->write_errno = errno;
        return 0;
      }
    }
  }
  if (std::fwrite(data, 1, bytes, s->file) != bytes || std::fflush(s->file) != 0) {
    s->write_errno = errno ? errno : EIO;
    return 0;  // aborts the transfer
  }
  s->written += bytes;
  if (*s->on_bytes) (*s->on_bytes)(s->offset + s->written, s->expected);
  return bytes;
}

}  // namespace

std::string HubReply::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

HubHttp::HubHttp(std::string endpoint, std::string token) : endpoint_(std::move(endpoint)), token_(std::move(token)) {
  while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
  curl_global_init(CURL_GLOBAL_DEFAULT);
  curl_ = curl_easy_init();
  if (!curl_) throw Error("libcurl could not start a session");
}

HubHttp::~HubHttp() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

namespace {

void common_options(CURL* c, const std::string& url, curl_slist* headers, Headers* h) {
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "g4-pull/1");
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled transfer (under 1 KiB/s for 60 s) fails instead of hanging; the part file stays.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
}

curl_slist* auth_headers(const std::string& token) {
  curl_slist* h = nullptr;
  if (!token.empty()) h = curl_slist_append(h, ("Authorization: Bearer " + token).c_str());
  return h;
}

}  // namespace

HubReply HubHttp::get(const std::string& path) {
  CURL* c = static_cast<CURL*>(curl_);
  HubReply r;
  Headers h{&r.headers};
  curl_slist* hl = auth_headers(token_);
  const std::string url = endpoint_ + path;
  common_options(c, url, hl, &h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_string);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(hl);
  if (rc != CURLE_OK) throw Error("GET " + url + " failed: " + curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

HubReply HubHttp::download(const std::string& path, const std::filesystem::path& part, uint64_t expected,
                           const std::function<void(uint64_t, uint64_t)>& on_bytes) {
  CURL* c = static_cast<CURL*>(curl_);
  std::error_code ec;
  uint64_t offset = std::filesystem::exists(part, ec) ? std::filesystem::file_size(part, ec) : 0;
  FILE* f = std::fopen(part.c_str(), offset > expected ? "wb" : "ab");
  if (!f) throw Error("cannot write " + part.string() + ": " + std::strerror(errno));
  if (offset > expected) offset = 0;  // longer than the file can be: not a prefix of it
  HubReply r;
  Headers h{&r.headers};
  Sink sink{c, f, offset, 0, expected, false, false, 0, {}, &on_bytes};
  curl_slist* hl = auth_headers(token_);
  const std::string url = endpoint_ + path;
  common_options(c, url, hl, &h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_file);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  const std::string range = std::to_string(offset) + "-";
  if (offset > 0 && offset < expected) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  CURLcode rc = CURLE_OK;
  if (offset < expected || expected == 0) rc = curl_easy_perform(c);
  curl_slist_free_all(hl);
  const int close_rc = std::fclose(f);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  if (offset >= expected && expected > 0) r.status = 206;  // nothing left to fetch
  const uint64_t have = sink.offset + sink.written;
  if (sink.write_errno != 0 || close_rc != 0)
    throw Error("writing " + part.string() + " failed after " + std::to_string(have) + " of " +
                std::to_string(expected) + " bytes: " + std::strerror(sink.write_errno ? sink.write_errno : errno) +
                " (free space and run g4 pull again: it resumes from there)");
  if (rc != CURLE_OK)
    throw TransferCut("the transfer of " + url + " stopped after " + std::to_string(have) + " of " +
                std::to_string(expected) + " bytes: " + curl_easy_strerror(rc) + " (run g4 pull again: it resumes)");
  r.body = std::move(sink.error_body);
  return r;
}

std::string hub_error_message(const HubReply& r, const std::string& what, const std::string& endpoint, bool has_token) {
  const std::string code = r.header("x-error-code"), msg = r.header("x-error-message");
  const std::string said = " (HTTP " + std::to_string(r.status) + (code.empty() ? "" : ", " + code) +
                           (msg.empty() ? "" : ": " + msg) + ")";
  if (code == "GatedRepo" || (r.status == 403 && msg.find("gated") != std::string::npos))
    return what + " is gated" + said + ": accept its license at " + endpoint + "/" + what.substr(0, what.find(' ')) +
           (has_token ? " with the account of your HF_TOKEN" : " and set HF_TOKEN to a token of that account");
  if (r.status == 401)
    return what + ": not found, or private" + said +
           (has_token ? ": the token in HF_TOKEN has no access to it" : ": set HF_TOKEN if it is private");
  if (r.status == 403) return what + ": access refused" + said + (has_token ? "" : ": set HF_TOKEN");
  if (r.status == 404) return what + ": not found on " + endpoint + said;
  return what + ": the hub answered HTTP " + std::to_string(r.status) + said;
}

}  // namespace g4::cli
