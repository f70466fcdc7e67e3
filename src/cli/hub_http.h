// The Hugging Face hub over HTTP(S) with libcurl, for `g4 pull`: small JSON GETs and file
// downloads that resume with Range requests. Errors name the URL, the HTTP status and the hub's
// own error code (X-Error-Code: GatedRepo, RepoNotFound, RevisionNotFound, EntryNotFound).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "platform/error.h"

namespace g4::cli {

// A transfer that stopped before the file was whole (connection closed, stalled): the part file
// is kept and a retry resumes it.
struct TransferCut : Error {
  using Error::Error;
};

struct HubReply {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names, the last response's
  std::string header(const std::string& name) const;
};

class HubHttp {
 public:
  // `token` ("" for none) goes out as "Authorization: Bearer ..." to the endpoint's host only
  // (libcurl drops it on a redirect to another host, as the hub's CDN redirects are).
  HubHttp(std::string endpoint, std::string token);
  ~HubHttp();
  HubHttp(const HubHttp&) = delete;
  HubHttp& operator=(const HubHttp&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  bool has_token() const { return !token_.empty(); }

  // GET endpoint + path, redirects followed. Throws only when no HTTP reply came at all.
  HubReply get(const std::string& path);

  // Downloads endpoint + path into `part`, appending from its current size with a Range request
  // (a server that answers 200 instead of 206 restarts the file). `on_bytes(done, total)` reports
  // progress. Returns the final reply (its body only when the status is an error). Throws naming
  // the file on a write error (disk full) or a transfer cut short, keeping `part` for a resume.
  HubReply download(const std::string& path, const std::filesystem::path& part, uint64_t expected_size,
                    const std::function<void(uint64_t, uint64_t)>& on_bytes);

 private:
  std::string endpoint_, token_;
  void* curl_ = nullptr;
};

// A clear message for a hub error reply: gated (accept the license, set a token), not found,
// unauthorized; `what` names the repository, revision or file asked for.
std::string hub_error_message(const HubReply& r, const std::string& what, const std::string& endpoint, bool has_token);

}  // namespace g4::cli
