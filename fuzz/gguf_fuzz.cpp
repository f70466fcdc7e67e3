// libFuzzer target: GGUF files (header, metadata, tensor table) through everything g4 reads from
// them: GgufFile::open, config_from_gguf (gemma4.* metadata), the tokenizer.ggml.* vocabulary,
// and load_model (tensor binding to the Hugging Face names).
// Asserts: refusals are g4::Error with a message; an accepted file's tensor views lie inside the
// mapping (first and last byte touched), start at or after the data section, have non-negative
// shapes and are aligned to general.alignment; typed metadata getters either answer or refuse
// with g4::Error; a tokenizer built from the metadata encodes and decodes text with ids in range.
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "engine/gguf_tokenizer.h"
#include "fuzz_util.h"
#include "model/gguf.h"
#include "model/gguf_config.h"
#include "model/model.h"

namespace fs = std::filesystem;
using namespace g4;

namespace {

void check_file(const GgufFile& g) {
  G4_FUZZ_CHECK(g.data_offset() <= g.file_size());
  G4_FUZZ_CHECK(g.alignment() > 0);
  for (const auto& [key, v] : g.metadata()) {
    try { (void)g.get_int(key); } catch (const g4::Error& e) { fuzz::check_error(e); }
    try { (void)g.get_float(key); } catch (const g4::Error& e) { fuzz::check_error(e); }
    try { (void)g.get_bool(key); } catch (const g4::Error& e) { fuzz::check_error(e); }
    try { (void)g.get_string(key); } catch (const g4::Error& e) { fuzz::check_error(e); }
    if (v.is_numeric_array() && v.count > 0) {
      (void)v.int_at(0);
      (void)v.int_at(v.count - 1);
      (void)v.float_at(v.count - 1);
    }
  }
  const std::byte* begin = nullptr;
  for (const auto& [name, t] : g.tensors()) {
    for (int64_t d : t.shape) G4_FUZZ_CHECK(d >= 0);
    (void)fuzz::touch(t.data, t.nbytes);
    (void)begin;
    G4_FUZZ_CHECK(t.file_offset >= g.data_offset());
    G4_FUZZ_CHECK(t.file_offset + t.nbytes <= g.file_size());
    G4_FUZZ_CHECK((t.file_offset - g.data_offset()) % g.alignment() == 0);
  }
  g.check_unchanged();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path file = fuzz::scratch_dir() / "input.gguf";
  fuzz::write_file(file, std::string_view(reinterpret_cast<const char*>(data), size));
  std::unique_ptr<GgufFile> g;
  try {
    g = GgufFile::open(file);
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
    return 0;
  }
  check_file(*g);
  bool config_ok = false;
  try {
    (void)config_from_gguf(*g);
    config_ok = true;
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  try {
    if (auto tok = tokenizer_from_gguf(*g)) {
      const auto ids = tok->encode("Hello, world! <bos> \xe2\x96\x81 \xff\n\n  x");
      for (int32_t id : ids) G4_FUZZ_CHECK(tok->vocab().valid_id(id));
      (void)tok->decode(ids);
    }
  } catch (const g4::Error& e) {
    fuzz::check_error(e);
  }
  if (config_ok) {
    try {
      auto m = load_model(file);
      m->check_unchanged();
    } catch (const g4::Error& e) {
      fuzz::check_error(e);
    }
  }
  return 0;
}
