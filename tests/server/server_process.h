// Starts the real `g4 serve` on a free loopback port for end-to-end tests, and stops it.
#pragma once
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace g4::test {

// Runs `g4 synth` once per call into dir (tiny-e; extra args such as --vocab 262144).
inline void synth_model(const std::filesystem::path& dir, const std::vector<std::string>& extra = {}) {
  std::string cmd = g4_binary().string() + " synth --preset tiny-e --seed 1 --out " + dir.string();
  for (const auto& e : extra) cmd += " " + e;
  cmd += " > " + (dir.string() + ".synth.log") + " 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("g4 synth failed: " + cmd);
}

class ServerProcess {
 public:
  // args: everything after `g4 serve` (the port is forced to 0 and read from the log).
  ServerProcess(const std::vector<std::string>& args, const std::filesystem::path& log_path) : log_(log_path) {
    std::vector<std::string> argv = {g4_binary().string(), "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until) {
      std::ifstream f(log_);
      std::string line;
      while (std::getline(f, line)) {
        if (line.find("\"event\":\"listening\"") == std::string::npos) continue;
        port_ = nlohmann::json::parse(line)["port"].get<int>();
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("g4 serve exited during startup:\n" + log_text());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("g4 serve did not log 'listening' within 120 s:\n" + log_text());
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log_text() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // The request log line whose "request_id" is `id` (the response's id). The server writes it
  // after the body, so a client can read its response first: waits up to `seconds` for it and
  // returns null when it never comes.
  nlohmann::json request_line(const std::string& id, int seconds = 30) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
      std::istringstream log(log_text());
      for (std::string line; std::getline(log, line);) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("event", "") == "request" && j.value("request_id", "") == id) return j;
      }
      if (std::chrono::steady_clock::now() >= until) return nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Whether the log holds `text` within `seconds` (for lines written after a response's body).
  bool log_shows(const std::string& text, int seconds = 30) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (log_text().find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  httplib::Client client(int read_timeout_s = 120) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(read_timeout_s, 0);
    c.set_connection_timeout(5, 0);
    return c;
  }
  // Polls /ready until 200 (throws with the last body otherwise).
  nlohmann::json wait_ready(int seconds = 120) const {
    auto c = client();
    std::string last;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (auto r = c.Get("/ready")) {
        last = r->body;
        if (r->status == 200) return nlohmann::json::parse(r->body);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("not ready within " + std::to_string(seconds) + " s; last /ready: " + last + "\nlog:\n" + log_text());
  }
  // Sends SIGTERM and waits for the exit status (-1 on timeout).
  int terminate(int seconds = 60) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  // Resident set size in KiB (VmRSS from /proc/PID/status).
  long rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Splits an SSE body into its data payloads ("[DONE]" included as is).
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(at, end - at);
    // "data: ..." alone, or after an "event: NAME" line (the Responses API names its events).
    if (event.rfind("data: ", 0) == 0) {
      out.push_back(event.substr(6));
    } else if (event.rfind("event: ", 0) == 0) {
      const size_t data = event.find("\ndata: ");
      if (data != std::string::npos) out.push_back(event.substr(data + 7));
    }
    at = end + 2;
  }
  return out;
}

}  // namespace g4::test
