// Remote image URLs: only listed hosts, redirects checked hop by hop, size and time bounded.
// A local httplib server plays the remote host.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "server/media_fetch.h"

namespace g4::server {
namespace {

class MediaHost : public ::testing::Test {
 protected:
  void SetUp() override {
    srv_.Get("/img", [](const httplib::Request&, httplib::Response& r) { r.set_content("PNGBYTES", "image/png"); });
    srv_.Get("/big", [](const httplib::Request&, httplib::Response& r) { r.set_content(std::string(5000, 'x'), "image/png"); });
    srv_.Get("/hop", [](const httplib::Request&, httplib::Response& r) { r.set_redirect("/img"); });
    srv_.Get("/off", [](const httplib::Request&, httplib::Response& r) { r.set_redirect("http://example.invalid/img"); });
    srv_.Get("/loop", [](const httplib::Request&, httplib::Response& r) { r.set_redirect("/loop"); });
    srv_.Get("/slow", [](const httplib::Request&, httplib::Response& r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      r.set_content("late", "image/png");
    });
    srv_.Get("/gone", [](const httplib::Request&, httplib::Response& r) { r.status = 404; });
    port_ = srv_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { srv_.listen_after_bind(); });
    opts_.allowed_hosts = {"127.0.0.1"};
    opts_.max_bytes = 1000;
    opts_.timeout_s = 0.5;
  }
  void TearDown() override {
    srv_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  // The fetched body, or the refusal's message (its param checked on the way).
  std::string fetch(const std::string& u) const {
    auto r = fetch_media(u, opts_, "messages[0].content[2]");
    if (auto* e = std::get_if<ApiError>(&r)) {
      EXPECT_EQ(e->status, 400);
      EXPECT_EQ(e->param, "messages[0].content[2].url");
      return "refused: " + e->message;
    }
    return std::get<std::string>(r);
  }

  httplib::Server srv_;
  std::thread thread_;
  int port_ = 0;
  MediaFetchOptions opts_;
};

TEST_F(MediaHost, FetchesFromAListedHostAndFollowsRedirectsOnIt) {
  EXPECT_EQ(fetch(url("/img")), "PNGBYTES");
  EXPECT_EQ(fetch(url("/hop")), "PNGBYTES");
}

TEST_F(MediaHost, RefusesWhatTheListOrTheLimitsDoNotAllow) {
  EXPECT_NE(fetch("http://localhost:" + std::to_string(port_) + "/img").find("host 'localhost' is not in"), std::string::npos);
  EXPECT_NE(fetch(url("/off")).find("redirect to host 'example.invalid'"), std::string::npos);
  EXPECT_NE(fetch(url("/loop")).find("more than 3 redirects"), std::string::npos);
  EXPECT_NE(fetch(url("/big")).find("larger than 1000 bytes"), std::string::npos);
  EXPECT_NE(fetch(url("/gone")).find("HTTP 404"), std::string::npos);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(fetch(url("/slow")).find("refused:"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.4);
  EXPECT_NE(fetch("ftp://127.0.0.1/img").find("only data: URLs and absolute http(s) URLs"), std::string::npos);
  opts_.allowed_hosts.clear();
  EXPECT_NE(fetch(url("/img")).find("remote images are off"), std::string::npos);
}

TEST(MediaUrl, SplitsHttpUrls) {
  auto u = split_http_url("HTTPS://Example.COM:8443/a/b.png?x=1#frag");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->path, "/a/b.png?x=1");
  EXPECT_EQ(split_http_url("http://[::1]/x")->host, "::1");
  EXPECT_EQ(split_http_url("http://h")->path, "/");
  for (const char* bad : {"http://user@host/x", "http://:80/x", "http://h:99999/", "http://h:x/", "file:///etc/passwd", "h/x"})
    EXPECT_FALSE(split_http_url(bad)) << bad;
  EXPECT_TRUE(host_allowed("Example.com", {"example.COM"}));
  EXPECT_FALSE(host_allowed("sub.example.com", {"example.com"}));
}

}  // namespace
}  // namespace g4::server
