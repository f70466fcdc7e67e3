// Helpers shared by tests: where the shared fixtures are, temp dirs, reading raw files.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "platform/error.h"
#include "platform/tensor_view.h"

namespace g4::test {

// ../shared beside the repository, or $G4_SHARED.
inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("G4_SHARED")) return env;
  return G4_SHARED_DIR;
}
inline std::filesystem::path fixtures_dir() { return shared_dir() / "fixtures"; }
inline std::filesystem::path g4_binary() { return G4_BINARY; }

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("g4test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Sets environment variables for one test (nullopt unsets) and puts the old values back.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const std::string& name, const std::optional<std::string>& value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    apply(name, value);
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) apply(name, value);
  }

 private:
  static void apply(const std::string& name, const std::optional<std::string>& value) {
    if (value) setenv(name.c_str(), value->c_str(), 1);
    else unsetenv(name.c_str());
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}
template <typename T = float>
inline std::vector<T> read_raw(const std::filesystem::path& p) {
  std::string b = read_file(p);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}
// Standard base64 with padding, for data: URLs in requests (the decoder under test is g4's own).
inline std::string base64(const std::string& bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= uint8_t(bytes[i + 2]);
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? a[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? a[v & 63] : '=';
  }
  return out;
}
inline std::vector<float> read_f32(const std::filesystem::path& p) { return read_raw<float>(p); }
inline std::vector<int> read_i32(const std::filesystem::path& p) { return read_raw<int>(p); }

// n token ids drawn uniformly from [4, vocab) (clear of the usual special ids 0..3).
inline std::vector<int> random_tokens(size_t n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  for (auto& v : t) v = int(rng() % unsigned(vocab - 4)) + 4;
  return t;
}

// n activations drawn from N(0, sigma²): the spread of hidden states in the kernel tests.
inline std::vector<float> random_activations(int64_t n, unsigned seed, float sigma = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng);
  return x;
}

// A [out, in] weight matrix view over `data` (out rows of row_bytes(dtype, in) bytes), for
// kernel tests that build weights in memory.
inline TensorView matrix_view(DType dtype, int64_t out, int64_t in, const void* data) {
  TensorView w;
  w.name = "w";
  w.dtype = dtype;
  w.shape = {out, in};
  w.data = static_cast<const std::byte*>(data);
  w.nbytes = row_bytes(dtype, in) * uint64_t(out);
  return w;
}

// Random blocks of a block type (or random values of a per-element type) for n values: every
// byte random, then each block's f16 scales set finite and modest (|scale| <= 0.05; random bits
// could make them inf or NaN). Throws for the interleaved row layouts (not a row format).
std::vector<std::byte> random_blocks(DType t, int64_t n, std::mt19937& rng);

// max_i |a[i] - b[i]| over n floats.
// The message of the g4::Error that fn throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

inline float max_abs_diff(const float* a, const float* b, size_t n) {
  float w = 0;
  for (size_t i = 0; i < n; ++i) w = std::max(w, std::fabs(a[i] - b[i]));
  return w;
}

// Runs a shell command, returns exit code; stdout+stderr captured into *out if given.
int run_command(const std::string& cmd, std::string* out = nullptr);

// `g4 ARGS` with stdout and stderr captured together into *out; returns the exit status.
int g4_command(const std::string& args, std::string* out);

// `g4 bench --model MODEL` on a minimal workload (4-token prompt, 2 tokens, depth 0, one repeat,
// 2 threads) plus `extra` flags; stdout and stderr together, the exit status in *rc.
std::string g4_quick_bench(const std::string& model, const std::string& extra, int* rc);

}  // namespace g4::test
