// Fault tests (issue 8): what happens when the world misbehaves around g4.
//   * a checkpoint truncated after load_model validated it is refused before use (the engine
//     re-checks the mapped sizes) and by a fresh load, never read past its end (SIGBUS);
//   * `g4 synth` and `g4 quantize` write to a temporary name and rename: a full disk (simulated
//     with RLIMIT_FSIZE, SIGXFSZ ignored, so write() fails with EFBIG) or a SIGKILL mid-write
//     never leaves a file that loads;
//   * SIGTERM while `g4 serve` loads the model ends the process promptly and cleanly (exit 0 or
//     killed by SIGTERM; never a hang, a crash signal or a core);
//   * a second `g4 serve` on a busy port fails fast with a message naming the address and the OS
//     reason, even when the port's owner allows SO_REUSEPORT sharing (as httplib's default does);
//   * a checkpoint truncated while `g4 serve` runs on it ends the server with a named fatal error
//     and exit status 75, not an anonymous SIGBUS.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/mapped_file.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

struct ShellRun {
  int status = 0;  // raw wait status
  std::string output;
};

// Runs a shell command line, output captured into a file.
ShellRun sh(const std::string& cmd, const fs::path& log) {
  ShellRun r;
  r.status = std::system(("(" + cmd + ") > " + log.string() + " 2>&1").c_str());
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  r.output = ss.str();
  return r;
}

std::string g4() { return test::g4_binary().string(); }

void synth(const fs::path& dir, const std::string& extra = "") {
  ShellRun r = sh(g4() + " synth --preset tiny-e --seed 3 --out " + dir.string() + " " + extra, dir.string() + ".log");
  ASSERT_EQ(r.status, 0) << r.output;
}

// Every final (non-.tmp) safetensors/GGUF file left in dir must load completely, and the
// directory as a model must either load or be refused with g4::Error.
void expect_nothing_half_written(const fs::path& dir) {
  if (!fs::exists(dir)) return;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name.ends_with(".safetensors")) {
      EXPECT_NO_THROW(SafetensorsArchive::open(e.path())) << name;
    }
  }
  try {
    auto m = load_model(dir);
    m->check_unchanged();
  } catch (const Error&) {
    // refused with a message: fine
  }
}

TEST(Fault, CheckpointTruncatedAfterValidationIsRefusedBeforeUse) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  synth(dir);
  auto model = load_model(dir);
  EXPECT_NO_THROW(model->check_unchanged());
  const fs::path file = dir / "model.safetensors";
  const auto full = fs::file_size(file);
  fs::resize_file(file, full / 2);

  try {
    model->check_unchanged();
    ADD_FAILURE() << "check_unchanged accepted a truncated file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  // The engine re-checks before it reads a weight.
  try {
    Engine engine(*model, EngineOptions{});
    ADD_FAILURE() << "the engine started on a truncated checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  // A fresh load refuses it too.
  EXPECT_THROW(load_model(dir), Error);
  // And the CLI says so instead of dying on SIGBUS.
  ShellRun r = sh(g4() + " generate --model " + dir.string() + " --prompt hi -n 2", tmp.path() / "gen.log");
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_NE(WEXITSTATUS(r.status), 0);
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
}

TEST(Fault, SynthOnFullDiskLeavesNothingThatLoads) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  // ulimit -f counts 1024-byte blocks; tiny-e's weights are ~2.5 MB.
  ShellRun r = sh("ulimit -f 512; trap '' XFSZ; exec " + g4() + " synth --preset tiny-e --out " + dir.string(), tmp.path() / "s.log");
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_NE(WEXITSTATUS(r.status), 0) << r.output;
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.tmp")) << "the temporary file is removed on failure";
  EXPECT_THROW(load_model(dir), Error);
  expect_nothing_half_written(dir);
}

TEST(Fault, QuantizeOnFullDiskLeavesNothingThatLoads) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  synth(dir);
  const fs::path out = tmp.path() / "q.gguf";
  ShellRun r = sh("ulimit -f 256; trap '' XFSZ; exec " + g4() + " quantize " + dir.string() + " " + out.string() + " --type q8_0",
             tmp.path() / "q.log");
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_NE(WEXITSTATUS(r.status), 0) << r.output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
  // Without the limit it succeeds and loads.
  r = sh(g4() + " quantize " + dir.string() + " " + out.string() + " --type q8_0", tmp.path() / "q2.log");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NO_THROW(load_model(out));
}

TEST(Fault, SynthKilledMidWriteLeavesNothingThatLoads) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  // A released geometry with a small vocabulary: hundreds of MB, so the kill lands mid-write.
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen((tmp.path() / "k.log").c_str(), "w", stdout);
    std::freopen((tmp.path() / "k.log").c_str(), "a", stderr);
    execl(test::g4_binary().c_str(), "g4", "synth", "--preset", "e2b", "--vocab", "512", "--dtype", "bf16", "--shard-mb", "256",
          "--out", dir.c_str(), (char*)nullptr);
    _exit(127);
  }
  // Wait until a temporary file holds some bytes, then kill.
  bool saw_tmp = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!saw_tmp && std::chrono::steady_clock::now() < until) {
    std::error_code ec;
    if (fs::exists(dir, ec))
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".tmp" && fs::file_size(e.path(), ec) > (1u << 20)) saw_tmp = true;
    if (!saw_tmp) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(saw_tmp) << "synth never wrote a temporary file";
  EXPECT_THROW(load_model(dir), Error);
  expect_nothing_half_written(dir);
}

TEST(Fault, SigtermDuringServeLoadExitsCleanly) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  synth(dir);
  for (int delay_ms : {0, 10, 30, 60, 120, 250, 500}) {
    const fs::path log = tmp.path() / ("serve" + std::to_string(delay_ms) + ".log");
    const pid_t pid = fork();
    if (pid == 0) {
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "a", stderr);
      execl(test::g4_binary().c_str(), "g4", "serve", "--model", dir.c_str(), "--port", "0", (char*)nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGTERM);
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "g4 serve did not exit within 30 s of SIGTERM sent " << delay_ms << " ms after start";
      continue;
    }
    const bool clean = (WIFEXITED(status) && WEXITSTATUS(status) == 0) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    EXPECT_TRUE(clean) << "SIGTERM after " << delay_ms << " ms: status " << status
                       << (WIFSIGNALED(status) ? " signal " + std::to_string(WTERMSIG(status)) : "");
  }
}

TEST(Fault, SecondServeOnBusyPortFailsWithClearMessage) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  synth(dir);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  // The owner allows port sharing, as any cpp-httplib server with its default socket options
  // (an older g4 serve among them) does: a second server that also asked for SO_REUSEPORT would
  // bind beside it and silently receive part of its connections.
  const int yes = 1;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof yes), 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  const auto t0 = std::chrono::steady_clock::now();
  ShellRun r = sh("timeout 60 " + g4() + " serve --model " + dir.string() + " --port " + std::to_string(port), tmp.path() / "busy.log");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(fd);
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_NE(WEXITSTATUS(r.status), 0);
  EXPECT_NE(WEXITSTATUS(r.status), 124) << "g4 serve hung on a busy port";
  EXPECT_LT(secs, 30);
  EXPECT_NE(r.output.find("cannot listen on 127.0.0.1:" + std::to_string(port) + ": Address already in use"),
            std::string::npos)
      << r.output;
}

// Sends one HTTP request to 127.0.0.1:port and returns whatever came back before the connection
// closed (empty when the server died first).
std::string http_exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) got.append(buf, size_t(n));
  }
  close(fd);
  return got;
}

TEST(Fault, CheckpointTruncatedWhileServingIsANamedFatalError) {
  // After the load-time checks (and the engine's re-check) pass, the weights file is truncated
  // under the running server. The next request reads a page of the mapping past the new end:
  // SIGBUS, which the MappedFile handler turns into a message naming the file and exit 75.
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  synth(dir);
  const fs::path log = tmp.path() / "serve.log";
  const pid_t pid = fork();
  if (pid == 0) {
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    execl(test::g4_binary().c_str(), "g4", "serve", "--model", dir.c_str(), "--port", "0", "--ready-interval", "0",
          (char*)nullptr);
    _exit(127);
  }
  // Serving: listening, and the start-up readiness check (a real generation) has run.
  int port = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < until) {
    const std::string text = test::read_file(log);
    const size_t at = text.find("\"event\":\"listening\"");
    if (at != std::string::npos && text.find("\"event\":\"readiness_check\"") != std::string::npos) {
      const size_t p = text.find("\"port\":", text.rfind('{', at));
      if (p != std::string::npos) port = std::atoi(text.c_str() + p + 7);
      break;
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (port <= 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    FAIL() << "g4 serve did not start serving:\n" << test::read_file(log);
  }
  const fs::path weights = dir / "model.safetensors";
  fs::resize_file(weights, 0);

  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4})";
  const std::string reply = http_exchange(port, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                                "Content-Type: application/json\r\nContent-Length: " +
                                                    std::to_string(body.size()) + "\r\n\r\n" + body);
  int status = 0;
  pid_t done = 0;
  const auto exit_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < exit_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "g4 serve kept running on a truncated checkpoint; reply:\n" << reply << "\nlog:\n" << test::read_file(log);
  }
  const std::string text = test::read_file(log);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status
                                 << (WIFSIGNALED(status) ? " killed by signal " + std::to_string(WTERMSIG(status)) : "") << "\n"
                                 << text;
  EXPECT_EQ(WEXITSTATUS(status), kMappedFileLostExitCode) << text;
  EXPECT_NE(text.find("g4: fatal: " + weights.string() + " was truncated"), std::string::npos) << text;
  EXPECT_EQ(reply.find("200 OK"), std::string::npos) << "answered from a truncated checkpoint:\n" << reply;
}

}  // namespace
}  // namespace g4
