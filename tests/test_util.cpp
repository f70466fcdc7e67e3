#include "test_util.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

namespace g4::test {

int run_command(const std::string& cmd, std::string* out) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  std::string text;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) text.append(buf.data(), n);
  int status = pclose(p);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int g4_command(const std::string& args, std::string* out) {
  return run_command(g4_binary().string() + " " + args + " 2>&1", out);
}

std::string g4_quick_bench(const std::string& model, const std::string& extra, int* rc) {
  std::string out;
  *rc = g4_command("bench --model " + model + " --prompt-len 4 --gen 2 --depth 0 --repeat 1 --threads 2 " + extra, &out);
  return out;
}

}  // namespace g4::test
