// libFuzzer target: safetensors header and model.safetensors.index.json (SafetensorsArchive::open).
// Input: byte 0 selects the form; the rest is
//   even: one .safetensors file (u64 header length, JSON header, data section);
//   odd:  a sharded directory: model.safetensors.index.json, then (after the first "\n@@\n")
//         the bytes of "s.safetensors"; the directory also holds a valid "fixed.safetensors"
//         (tensors "a" [2,3] F32 and "b" [4] BF16) that an index may name.
// Asserts: refusals are g4::Error with a message; an accepted archive's every tensor lies inside
// its mapping (first and last byte touched), has a non-negative shape whose byte size matches
// its dtype, is findable by name, and check_unchanged() passes on the untouched files.
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "fuzz_util.h"
#include "model/safetensors.h"
#include "platform/dtype.h"

namespace fs = std::filesystem;
using namespace g4;

namespace {

fs::path sharded_dir() {
  static const fs::path d = [] {
    fs::path p = fuzz::scratch_dir() / "sharded";
    fs::create_directories(p);
    std::vector<TensorSpec> specs = {{"a", DType::F32, {2, 3}}, {"b", DType::BF16, {4}}};
    write_safetensors(p / "fixed.safetensors", specs, [](const TensorSpec& s, std::byte* out) {
      for (uint64_t i = 0; i < s.nbytes(); ++i) out[i] = std::byte(i * 7 + 1);
    });
    return p;
  }();
  return d;
}

void check_archive(const SafetensorsArchive& ar) {
  uint64_t sum = 0;
  for (const auto& [name, v] : ar.tensors()) {
    G4_FUZZ_CHECK(v.name == name);
    G4_FUZZ_CHECK(ar.find(name) == &v);
    int64_t n = 1;
    for (int64_t d : v.shape) {
      G4_FUZZ_CHECK(d >= 0);
      n *= d;
    }
    G4_FUZZ_CHECK(dtype_size(v.dtype) > 0);  // safetensors carries per-element types only
    G4_FUZZ_CHECK(v.nbytes == uint64_t(n) * dtype_size(v.dtype));
    sum += fuzz::touch(v.data, v.nbytes);
    if (v.nbytes >= dtype_size(v.dtype) && n > 0) (void)v.at(n - 1);
  }
  (void)sum;
  ar.check_unchanged();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)sharded_dir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  fs::path target;
  if ((data[0] & 1) == 0) {
    target = fuzz::scratch_dir() / "single.safetensors";
    fuzz::write_file(target, in);
  } else {
    target = sharded_dir();
    const size_t cut = in.find("\n@@\n");
    fuzz::write_file(target / "model.safetensors.index.json", in.substr(0, cut));
    fuzz::write_file(target / "s.safetensors", cut == std::string_view::npos ? std::string_view() : in.substr(cut + 4));
  }
  try {
    SafetensorsArchive ar = SafetensorsArchive::open(target);
    check_archive(ar);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  return 0;
}
