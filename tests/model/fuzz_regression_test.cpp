// Inputs found by the fuzz targets (fuzz/, scripts/fuzz.sh), kept as regression tests.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_str(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

// A float metadata value far outside the int64 range (or NaN, or infinite) was converted with a
// plain cast while reading the file (GgufValue::i): undefined behaviour, caught by UBSan. It now
// saturates (NaN -> 0), in scalars and in arrays.
TEST(GgufFuzzRegression, HugeAndNonFiniteFloatMetadataSaturates) {
  std::string f = "GGUF";
  put<uint32_t>(f, 3);
  put<uint64_t>(f, 0);  // tensors
  put<uint64_t>(f, 4);  // key/values
  put_str(f, "big.f32");
  put<uint32_t>(f, uint32_t(GgufType::F32));
  put<float>(f, 8.50706e+31f);
  put_str(f, "neg.f64");
  put<uint32_t>(f, uint32_t(GgufType::F64));
  put<double>(f, -1e300);
  put_str(f, "nan.f64");
  put<uint32_t>(f, uint32_t(GgufType::F64));
  put<double>(f, std::numeric_limits<double>::quiet_NaN());
  put_str(f, "arr.f32");
  put<uint32_t>(f, uint32_t(GgufType::ARRAY));
  put<uint32_t>(f, uint32_t(GgufType::F32));
  put<uint64_t>(f, 3);
  put<float>(f, std::numeric_limits<float>::infinity());
  put<float>(f, -std::numeric_limits<float>::max());
  put<float>(f, -2.75f);
  f.append((32 - f.size() % 32) % 32, '\0');

  test::TempDir tmp;
  const auto path = tmp.path() / "floats.gguf";
  std::ofstream(path, std::ios::binary).write(f.data(), std::streamsize(f.size()));
  auto g = GgufFile::open(path);
  EXPECT_EQ(g->find("big.f32")->i, INT64_MAX);
  EXPECT_EQ(g->find("neg.f64")->i, INT64_MIN);
  EXPECT_EQ(g->find("nan.f64")->i, 0);
  EXPECT_FLOAT_EQ(float(*g->get_float("big.f32")), 8.50706e+31f);
  const GgufValue* a = g->find("arr.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->int_at(0), INT64_MAX);
  EXPECT_EQ(a->int_at(1), INT64_MIN);
  EXPECT_EQ(a->int_at(2), -2);
}

void write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

void expect_g4_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A number JSON cannot hold as a double (1e9999) made nlohmann throw out_of_range.406, which is
// not a parse_error: it escaped the loaders as a non-g4 exception (fuzz/safetensors_fuzz).
TEST(JsonFuzzRegression, NumberOverflowInJsonIsAG4Error) {
  test::TempDir tmp;
  // model.safetensors.index.json
  const auto dir = tmp.path() / "sharded";
  std::filesystem::create_directories(dir);
  write(dir / "model.safetensors.index.json", R"({"metadata": {"total_size": 333333333333333333333333e3333}, "weight_map": {}})");
  expect_g4_error([&] { SafetensorsArchive::open(dir); }, "model.safetensors.index.json");
  // a safetensors header
  std::string header = R"({"a": {"dtype": "F32", "shape": [1e9999], "data_offsets": [0, 4]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file;
  put<uint64_t>(file, header.size());
  file += header + std::string(4, '\0');
  write(tmp.path() / "h.safetensors", file);
  expect_g4_error([&] { SafetensorsArchive::open(tmp.path() / "h.safetensors"); }, "h.safetensors");
  // config.json
  write(tmp.path() / "config.json", R"({"model_type": "gemma4_text", "rms_norm_eps": -1e400})");
  expect_g4_error([&] { load_config(tmp.path() / "config.json"); }, "config.json");
}

// parse_config read model_type (and the top-level tie_word_embeddings) with json::value(), which
// throws a type_error when the field has another type (fuzz/config_fuzz).
TEST(ConfigFuzzRegression, WrongTypedTopLevelFieldsAreG4Errors) {
  for (const char* text : {R"({"model_type": {"m_size": 512}})", R"({"model_type": 4})",
                           R"({"model_type": "gemma4", "text_config": {"model_type": "gemma4_text"}, "tie_word_embeddings": "yes"})"}) {
    const auto j = nlohmann::json::parse(text);
    EXPECT_THROW(parse_config(j, "config.json"), Error) << text;
  }
}

}  // namespace
}  // namespace g4
