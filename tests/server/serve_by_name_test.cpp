// `g4 serve --model org/name`: a model found in a Hugging Face cache tree written as
// huggingface_hub writes it (blobs + relative symlinks) is served under its repo id, passes the
// readiness generation and answers a chat request; the listening line names the snapshot.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "fake_hf_cache.h"
#include "server_process.h"
#include "test_util.h"

namespace g4 {
namespace serve_by_name_test {

namespace fs = std::filesystem;

TEST(ServeByName, ServesARepoIdFromTheHubCache) {
  test::TempDir tmp;
  test::synth_model(tmp / "tiny");
  const std::string commit = test::fake_commit('5');
  test::FakeHfRepo repo(tmp / "hub", "org", "tiny");
  for (const auto& e : fs::directory_iterator(tmp / "tiny")) repo.copy_in(commit, e.path().filename().string(), e.path());
  repo.ref("main", commit);

  test::ScopedEnv env;  // the server inherits it
  env.set("HF_HUB_CACHE", (tmp / "hub").string());
  env.set("HF_HOME", std::nullopt);
  test::ServerProcess server({"--model", "org/tiny", "--threads", "1"}, tmp / "serve.log");
  server.wait_ready();

  nlohmann::json listening;
  std::istringstream log(server.log_text());
  for (std::string line; std::getline(log, line);)
    if (line.find("\"event\":\"listening\"") != std::string::npos) listening = nlohmann::json::parse(line);
  EXPECT_EQ(listening["model"], "org/tiny");
  EXPECT_EQ(listening["source"]["commit"], commit);
  EXPECT_EQ(listening["source"]["path"], repo.snapshot(commit).string());
  EXPECT_EQ(listening["source"]["cache"], (tmp / "hub").string());

  auto c = server.client();
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models && models->status == 200);
  EXPECT_EQ(nlohmann::json::parse(models->body)["data"][0]["id"], "org/tiny");
  const nlohmann::json req = {{"model", "org/tiny"}, {"max_tokens", 3},
                              {"messages", {{{"role", "user"}, {"content", "hello"}}}}};
  const auto chat = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(nlohmann::json::parse(chat->body)["usage"]["completion_tokens"], 3) << chat->body;
}

}  // namespace serve_by_name_test
}  // namespace g4
