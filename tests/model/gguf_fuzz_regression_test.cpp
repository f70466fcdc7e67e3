// Inputs found by fuzz/gguf_fuzz (scripts/fuzz.sh), kept as regression tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "model/gguf.h"
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

}  // namespace
}  // namespace g4
