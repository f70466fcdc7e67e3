// Images end to end: the real `g4 serve` on the tiny vision fixture (with a synthetic tokenizer
// that holds the fixture's moved image tokens), chat image_url and Responses input_image parts,
// data: URLs and an allow-listed local host, usage, the prefix cache, every refusal by name,
// and the same answer as `g4 generate --image` for the same image and prompt.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "server_process.h"
#include "text/synth_tokenizer.h"

namespace g4::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kFixture = fixtures_dir() / "gemma4-vision-tiny";

std::string png(const std::string& name) { return read_file(kFixture / "images" / (name + ".png")); }
std::string data_url(const std::string& bytes) { return "data:image/png;base64," + base64(bytes); }

json image_part(const std::string& url, const std::string& detail = "") {
  json iu = {{"url", url}};
  if (!detail.empty()) iu["detail"] = detail;
  return {{"type", "image_url"}, {"image_url", iu}};
}

json chat(json content, json extra = json::object()) {
  json b = {{"model", "m"}, {"max_tokens", 6}, {"temperature", 0}, {"messages", {{{"role", "user"}, {"content", content}}}}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

class ServerImages : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kFixture / "tiny-e-vision" / "hf" / "config.json")) return;
    dir_ = new TempDir();
    const fs::path m = *dir_ / "m";
    fs::create_directories(m);
    for (const char* f : {"config.json", "model.safetensors", "processor_config.json"})
      fs::copy_file(kFixture / "tiny-e-vision" / "hf" / f, m / f);
    text::write_synth_tokenizer(m, 512, {{500, "<|image>"}, {501, "<|image|>"}, {502, "<image|>"}});
    // The image host: one PNG, and a redirect off the allowed list.
    host_ = new httplib::Server();
    host_->Get("/img0.png", [](const httplib::Request&, httplib::Response& r) { r.set_content(png("img0_exact_108x84"), "image/png"); });
    host_->Get("/away", [](const httplib::Request&, httplib::Response& r) { r.set_redirect("http://example.invalid/img0.png"); });
    host_port_ = host_->bind_to_any_port("127.0.0.1");
    host_thread_ = new std::thread([] { host_->listen_after_bind(); });
    server_ = new ServerProcess({"--model", m.string(), "--name", "m", "--ctx", "512", "--threads", "1", "--ready-interval",
                                 "0", "--allowed-media-domains", "127.0.0.1"},
                                *dir_ / "server.log");
  }
  static void TearDownTestSuite() {
    delete server_;
    if (host_) host_->stop();
    if (host_thread_) host_thread_->join();
    delete host_thread_;
    delete host_;
    delete dir_;
  }
  void SetUp() override {
    if (!server_) GTEST_SKIP() << "no vision fixtures at " << kFixture;
  }
  static json post(const std::string& path, const json& body, int expect = 200) {
    auto c = server_->client();
    auto r = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, expect) << r->body;
    return json::parse(r->body, nullptr, false);
  }
  static std::string host_url(const std::string& path) { return "http://127.0.0.1:" + std::to_string(host_port_) + path; }

  static TempDir* dir_;
  static ServerProcess* server_;
  static httplib::Server* host_;
  static std::thread* host_thread_;
  static int host_port_;
};
TempDir* ServerImages::dir_ = nullptr;
ServerProcess* ServerImages::server_ = nullptr;
httplib::Server* ServerImages::host_ = nullptr;
std::thread* ServerImages::host_thread_ = nullptr;
int ServerImages::host_port_ = 0;

TEST_F(ServerImages, AnImageTakesItsSoftTokensAndIsAnsweredTheSameEveryWay) {
  const json text_only = post("/v1/chat/completions", chat(json::array({{{"type", "text"}, {"text", "what is it"}}})));
  const json img = json::array({image_part(data_url(png("img0_exact_108x84"))), {{"type", "text"}, {"text", "what is it"}}});
  const json r = post("/v1/chat/completions", chat(img));
  // img0 is 108x84 at budget 70: 27x21 patches, 63 soft tokens, between <|image> and <image|>.
  EXPECT_EQ(r["usage"]["prompt_tokens"].get<int>(), text_only["usage"]["prompt_tokens"].get<int>() + 65);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["image_tokens"], 63);
  EXPECT_GT(r["g4"]["timings"]["vision_s"].get<double>(), 0);
  const std::string answer = r["choices"][0]["message"]["content"];
  EXPECT_NE(answer, text_only["choices"][0]["message"]["content"].get<std::string>());

  // Again: the prefix cache holds the image's KV (keyed by its pixels), same answer.
  const json again = post("/v1/chat/completions", chat(img));
  EXPECT_EQ(again["choices"][0]["message"]["content"], answer);
  EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 64);
  // detail "low" is budget 70, this model's default too.
  const json low = json::array({image_part(data_url(png("img0_exact_108x84")), "low"), {{"type", "text"}, {"text", "what is it"}}});
  EXPECT_EQ(post("/v1/chat/completions", chat(low))["choices"][0]["message"]["content"], answer);
  // From the allowed host.
  const json remote = json::array({image_part(host_url("/img0.png")), {{"type", "text"}, {"text", "what is it"}}});
  EXPECT_EQ(post("/v1/chat/completions", chat(remote))["choices"][0]["message"]["content"], answer);
  // Responses' input_image.
  const json resp = post("/v1/responses", {{"model", "m"}, {"max_output_tokens", 6}, {"temperature", 0}, {"store", false},
                                           {"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", data_url(png("img0_exact_108x84"))}},
                                                                                      {{"type", "input_text"}, {"text", "what is it"}}}}}}}});
  EXPECT_EQ(resp["usage"]["input_tokens"], r["usage"]["prompt_tokens"]);
  EXPECT_EQ(resp["usage"]["input_tokens_details"]["image_tokens"], 63);
  EXPECT_EQ(resp["output"][0]["content"][0]["text"], answer);
  // g4 generate with the same image and prompt, through the CLI's own path.
  const std::string cmd = g4_binary().string() + " generate --model " + (*dir_ / "m").string() + " --chat --prompt 'what is it'" +
                          " --image " + (kFixture / "images" / "img0_exact_108x84.png").string() + " -n 6 --threads 1 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  // The chat response's content ends without the trailing newlines the raw stream has.
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out, answer) << cmd;
}

// A sample's value in a /metrics body (-1 when absent).
double scraped(const std::string& text, const std::string& name) {
  const size_t p = text.find("\n" + name + " ");
  return p == std::string::npos ? -1 : std::stod(text.substr(p + name.size() + 2));
}

// The same image after different text: the prefix cache misses at the image, the encoder cache
// does not, so the tower runs once. /metrics and the request log line say so.
TEST_F(ServerImages, AnImageSentAgainAfterOtherTextSkipsTheTowerAndIsCounted) {
  auto c = server_->client();
  const auto scrape = [&] { return c.Get("/metrics")->body; };
  const auto ask = [&](const std::string& text) {
    return post("/v1/chat/completions", chat(json::array({{{"type", "text"}, {"text", text}},
                                                          image_part(data_url(png("img1_wide_60x150")))})));
  };
  const std::string m0 = scrape();
  const json first = ask("look at this");
  const std::string m1 = scrape();
  const json second = ask("and now describe");
  const std::string m2 = scrape();
  const int64_t S = first["usage"]["prompt_tokens_details"]["image_tokens"];
  ASSERT_GT(S, 0);
  // The first: encoded, unless an earlier test already sent img1 (then a cache hit); prefilled.
  EXPECT_EQ(scraped(m1, "g4_images_encoded_total") - scraped(m0, "g4_images_encoded_total") +
                scraped(m1, "g4_image_cache_hits_total") - scraped(m0, "g4_image_cache_hits_total"),
            1);
  EXPECT_EQ(scraped(m1, "g4_image_prefill_tokens_total") - scraped(m0, "g4_image_prefill_tokens_total"), S);
  // The second: from the encoder cache, no tower time, the soft tokens prefilled again.
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["image_tokens"], S);
  EXPECT_EQ(second["g4"]["timings"]["vision_s"].get<double>(), 0);
  EXPECT_EQ(scraped(m2, "g4_images_encoded_total"), scraped(m1, "g4_images_encoded_total"));
  EXPECT_EQ(scraped(m2, "g4_vision_seconds_total"), scraped(m1, "g4_vision_seconds_total"));
  EXPECT_EQ(scraped(m2, "g4_image_cache_hits_total") - scraped(m1, "g4_image_cache_hits_total"), 1);
  EXPECT_EQ(scraped(m2, "g4_image_prefill_tokens_total") - scraped(m1, "g4_image_prefill_tokens_total"), S);
  EXPECT_GT(scraped(m2, "g4_vision_seconds_total"), 0);
  // The request log line of the second carries the image fields.
  const json last = server_->request_line(second["id"]);
  ASSERT_TRUE(last.is_object()) << server_->log_text();
  EXPECT_EQ(last["path"], "/v1/chat/completions");
  EXPECT_EQ(last["image_tokens"], S);
  EXPECT_EQ(last["vision_s"], 0.0);
  EXPECT_EQ(last["image_cache_hits"], 1);
  EXPECT_EQ(last["images_encoded"], 0);
}

// The official OpenAI client (npm `openai`, scripts/install-node-deps.sh) sends img0 as a data:
// URL, in chat and in Responses (tests/server/node/openai_image_test.mjs).
TEST_F(ServerImages, OpenAiNodeClientSendsAnImage) {
  const fs::path node_dir = fs::path(G4_SOURCE_DIR) / "tests" / "server" / "node";
  ASSERT_TRUE(fs::exists(node_dir / "node_modules" / "openai" / "package.json"))
      << "the npm package 'openai' is not installed in " << node_dir << ": run scripts/install-node-deps.sh "
      << "(scripts/test.sh does); this test does not skip";
  const fs::path log = *dir_ / "node_image.log";
  const std::string cmd = "cd " + node_dir.string() + " && G4_BASE_URL=http://127.0.0.1:" + std::to_string(server_->port()) +
                          "/v1 G4_MODEL=m G4_IMAGE=" + (kFixture / "images" / "img0_exact_108x84.png").string() +
                          " G4_IMAGE_TOKENS=63 node openai_image_test.mjs > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string out = read_file(log);
  EXPECT_EQ(rc, 0) << out << "\nserver log:\n" << server_->log_text();
  EXPECT_NE(out.find("chat image ok"), std::string::npos) << out;
  EXPECT_NE(out.find("all OpenAI image checks passed"), std::string::npos) << out;
}

TEST_F(ServerImages, ABiggerBudgetGivesMoreSoftTokens) {
  const json img = json::array({image_part(data_url(png("img3_rings_200x200"))), {{"type", "text"}, {"text", "x"}}});
  const json base = post("/v1/chat/completions", chat(img));
  const json more = post("/v1/chat/completions", chat(img, {{"g4", {{"max_image_tokens", 140}}}}));
  EXPECT_EQ(base["usage"]["prompt_tokens_details"]["image_tokens"], 64);
  EXPECT_GT(more["usage"]["prompt_tokens_details"]["image_tokens"].get<int>(), 64);
  EXPECT_LE(more["usage"]["prompt_tokens_details"]["image_tokens"].get<int>(), 140);
}

TEST_F(ServerImages, BadImagesAreRefusedNamingThePart) {
  const auto error = [](const json& content) {
    const json e = post("/v1/chat/completions", chat(content), 400)["error"];
    return std::make_pair(e.value("param", ""), e.value("message", ""));
  };
  const json text = {{"type", "text"}, {"text", "x"}};
  const std::string whole = png("img0_exact_108x84");
  auto [p1, m1] = error(json::array({text, image_part("data:image/png;base64,iVBORw0KG*==")}));
  EXPECT_EQ(p1, "messages[0].content[1].url") << m1;
  EXPECT_NE(m1.find("'*' at offset"), std::string::npos) << m1;
  auto [p2, m2] = error(json::array({image_part(data_url(whole.substr(0, whole.size() / 2))), text}));
  EXPECT_EQ(p2, "messages[0].content[0]") << m2;
  EXPECT_NE(m2.find("truncated"), std::string::npos) << m2;
  auto [p3, m3] = error(json::array({image_part("http://localhost:1/x.png"), text}));
  EXPECT_EQ(p3, "messages[0].content[0].url") << m3;
  EXPECT_NE(m3.find("not in the server's --allowed-media-domains"), std::string::npos) << m3;
  auto [p4, m4] = error(json::array({image_part(host_url("/away")), text}));
  EXPECT_NE(m4.find("redirect to host 'example.invalid'"), std::string::npos) << m4;
  auto [p5, m5] = error(json::array({image_part(data_url("GIF89a....")), text}));
  EXPECT_NE(m5.find("GIF"), std::string::npos) << m5;
  // The placeholder typed as text, with no image to fill it.
  auto [p6, m6] = error(json::array({{{"type", "text"}, {"text", "see <|image|> here"}}}));
  EXPECT_NE(m6.find("1 image placeholder token(s)"), std::string::npos) << m6;
  // The server is still up and answering.
  EXPECT_EQ(server_->client().Get("/health")->status, 200);
}

}  // namespace
}  // namespace g4::test
