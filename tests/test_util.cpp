#include "test_util.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>

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

std::vector<std::byte> random_blocks(DType t, int64_t n, std::mt19937& rng) {
  std::vector<std::byte> b(row_bytes(t, n));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& x : b) x = std::byte(uint8_t(byte(rng)));
  const size_t bb = dtype_block_bytes(t);
  std::uniform_real_distribution<float> sc(-0.05f, 0.05f);
  auto set_half = [&](std::byte* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  for (size_t k = 0; k < b.size() / bb; ++k) {
    std::byte* blk = b.data() + k * bb;
    switch (t) {
      case DType::Q8_0: case DType::Q4_0: set_half(blk, sc(rng)); break;
      case DType::Q4_1: case DType::Q4_K: case DType::Q5_K: set_half(blk, sc(rng)); set_half(blk + 2, sc(rng)); break;
      case DType::Q6_K: set_half(blk + 208, sc(rng)); break;
      case DType::F16: set_half(blk, sc(rng) * 20); break;
      case DType::BF16: { const uint16_t h = f32_to_bf16(sc(rng) * 20); std::memcpy(blk, &h, 2); break; }
      case DType::F32: { const float f = sc(rng) * 20; std::memcpy(blk, &f, 4); break; }
      case DType::Q8_0_R16: case DType::Q4_0_R16: case DType::Q4_K_R16: case DType::Q5_K_R16: case DType::Q6_K_R16: case DType::BF16_R16: throw std::invalid_argument("random_blocks: row layouts only");
    }
  }
  return b;
}

std::string g4_quick_bench(const std::string& model, const std::string& extra, int* rc) {
  std::string out;
  *rc = g4_command("bench --model " + model + " --prompt-len 4 --gen 2 --depth 0 --repeat 1 --threads 2 " + extra, &out);
  return out;
}

}  // namespace g4::test
