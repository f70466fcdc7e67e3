// The safetensors reader refuses every kind of broken file with a message naming the file,
// the tensor and the offending value; broken files are written here, byte by byte.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xff);
  return s;
}

// A file with the given header text and `data_len` bytes of data.
std::string make_file(const std::string& header, size_t data_len) {
  return le64(header.size()) + header + std::string(data_len, '\x01');
}

std::string open_error(const std::filesystem::path& p) {
  try {
    SafetensorsArchive::open(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class SafetensorsRefusal : public ::testing::Test {
 protected:
  test::TempDir dir;
  std::string refuse(const std::string& bytes) {
    const auto p = dir / "model.safetensors";
    test::write_file(p, bytes);
    std::string e = open_error(p);
    EXPECT_FALSE(e.empty()) << "accepted a broken file";
    EXPECT_NE(e.find(p.string()), std::string::npos) << "error does not name the file: " << e;
    return e;
  }
};

TEST_F(SafetensorsRefusal, ReadsAValidFile) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},"__metadata__":{"format":"pt"}})";
  test::write_file(dir / "ok.safetensors", make_file(h, 22));
  auto ar = SafetensorsArchive::open(dir / "ok.safetensors");
  ASSERT_NE(ar.find("a"), nullptr);
  EXPECT_EQ(ar.find("a")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ar.find("b")->dtype, DType::BF16);
  EXPECT_EQ(ar.find("b")->nbytes, 6u);
  EXPECT_EQ(ar.data_bytes(), 22u);
  EXPECT_EQ(ar.find("missing"), nullptr);
}

TEST_F(SafetensorsRefusal, EmptyAndTinyFiles) {
  EXPECT_NE(refuse("").find("shorter than the 8-byte header length"), std::string::npos);
  EXPECT_NE(refuse("abc").find("shorter"), std::string::npos);
}

TEST_F(SafetensorsRefusal, HeaderLengthPastEndOfFile) {
  EXPECT_NE(refuse(le64(1000) + "{}").find("runs past the end of the file"), std::string::npos);
  EXPECT_NE(refuse(le64(~0ull) + "{}").find("runs past the end"), std::string::npos);
}

TEST_F(SafetensorsRefusal, BadHeaderJson) {
  EXPECT_NE(refuse(make_file("{\"a\": [", 0)).find("malformed"), std::string::npos);
  EXPECT_NE(refuse(make_file("[1,2]", 0)).find("not an object"), std::string::npos);
  EXPECT_NE(refuse(make_file(R"({"a":{"dtype":"F32"}})", 0)).find("'a'"), std::string::npos);
  EXPECT_NE(refuse(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)).find("negative"),
            std::string::npos);
}

TEST_F(SafetensorsRefusal, UnsupportedDtype) {
  std::string e = refuse(make_file(R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4));
  EXPECT_NE(e.find("'w'"), std::string::npos);
  EXPECT_NE(e.find("F8_E4M3"), std::string::npos);
}

TEST_F(SafetensorsRefusal, OffsetsOutOfRangeOrInconsistent) {
  // Truncated data: the header promises 16 bytes, the file holds 8.
  std::string e = refuse(make_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  EXPECT_NE(e.find("run past the data section"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos);
  e = refuse(make_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16));
  EXPECT_NE(e.find("needs 16"), std::string::npos) << e;
  e = refuse(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 16));
  EXPECT_NE(e.find("end before begin"), std::string::npos) << e;
}

TEST_F(SafetensorsRefusal, OverlappingTensors) {
  std::string e = refuse(make_file(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
  // Overlap with a non-adjacent earlier range is caught too.
  e = refuse(make_file(
      R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"c":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 32));
  EXPECT_NE(e.find("overlap"), std::string::npos) << e;
}

TEST_F(SafetensorsRefusal, ShardedIndex) {
  const std::string h1 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string h2 = R"({"b":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
  test::write_file(dir / "s1.safetensors", make_file(h1, 8));
  test::write_file(dir / "s2.safetensors", make_file(h2, 4));
  test::write_file(dir / "model.safetensors.index.json",
                   R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  auto ar = SafetensorsArchive::open(dir.path());
  EXPECT_EQ(ar.files().size(), 2u);
  ASSERT_NE(ar.find("b"), nullptr);
  EXPECT_EQ(ar.find("b")->dtype, DType::F16);
  // The index names a tensor its shard lacks.
  test::write_file(dir / "model.safetensors.index.json",
                   R"({"weight_map":{"a":"s1.safetensors","zz":"s1.safetensors"}})");
  EXPECT_NE(open_error(dir.path()).find("'zz'"), std::string::npos);
  // The index points outside the directory.
  test::write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
  EXPECT_NE(open_error(dir.path()).find("outside the directory"), std::string::npos);
  test::write_file(dir / "model.safetensors.index.json", R"({"weight_map": 3})");
  EXPECT_NE(open_error(dir.path()).find("weight_map"), std::string::npos);
  test::write_file(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "missing.safetensors"}})");
  EXPECT_NE(open_error(dir.path()).find("missing.safetensors"), std::string::npos);
}

TEST(Safetensors, WriterRoundTripAndSharding) {
  test::TempDir dir;
  std::vector<TensorSpec> specs = {{"x", DType::F32, {3, 4}}, {"y", DType::BF16, {5}}, {"z", DType::F16, {2, 2}}};
  auto fill = [](const TensorSpec& s, std::byte* out) {
    for (uint64_t i = 0; i < s.nbytes(); ++i) out[i] = std::byte(uint8_t(i * 7 + s.name[0]));
  };
  auto one = write_safetensors_sharded(dir / "one", specs, fill, 1 << 20);
  ASSERT_EQ(one.size(), 1u);
  auto many = write_safetensors_sharded(dir / "many", specs, fill, 40);  // forces shards
  EXPECT_GT(many.size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir / "many" / "model.safetensors.index.json"));
  auto a = SafetensorsArchive::open(dir / "one");
  auto b = SafetensorsArchive::open(dir / "many");
  for (const auto& s : specs) {
    const TensorView* ta = a.find(s.name);
    const TensorView* tb = b.find(s.name);
    ASSERT_TRUE(ta && tb) << s.name;
    EXPECT_EQ(ta->shape, s.shape);
    EXPECT_EQ(ta->nbytes, s.nbytes());
    EXPECT_EQ(std::memcmp(ta->data, tb->data, ta->nbytes), 0) << s.name;
  }
  // No temporary files are left behind.
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

// I64 tensors (a drafter's token ordering) are index tables, kept apart from the weights; their
// size is checked against their shape like any other.
TEST(Safetensors, Int64TablesAreReadApartFromWeights) {
  test::TempDir dir;
  TensorSpec ids{"ids", DType::F32, {3}};
  ids.int64 = true;
  const std::vector<TensorSpec> specs = {{"w", DType::F32, {2}}, ids};
  const int64_t values[3] = {-5, 1ll << 40, 7};
  write_safetensors(dir / "a.safetensors", specs, [&](const TensorSpec& s, std::byte* out) {
    if (s.int64) std::memcpy(out, values, sizeof values);
    else std::memset(out, 0, s.nbytes());
  });
  const auto ar = SafetensorsArchive::open(dir / "a.safetensors");
  EXPECT_TRUE(ar.find("w"));
  EXPECT_FALSE(ar.find("ids"));
  const Int64Tensor& t = ar.int64_tensors().at("ids");
  EXPECT_EQ(t.shape, std::vector<int64_t>{3});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.value(i), values[i]);
  test::write_file(dir / "b.safetensors", make_file(R"({"ids":{"dtype":"I64","shape":[3],"data_offsets":[0,12]}})", 12));
  EXPECT_NE(open_error(dir / "b.safetensors").find("needs 24"), std::string::npos) << open_error(dir / "b.safetensors");
}

TEST(Safetensors, TruncatedAfterOpenIsDetected) {
  test::TempDir dir;
  std::vector<TensorSpec> specs = {{"x", DType::F32, {64}}};
  write_safetensors(dir / "m.safetensors", specs, [](const TensorSpec&, std::byte* o) { std::memset(o, 0, 256); });
  auto ar = SafetensorsArchive::open(dir / "m.safetensors");
  ar.check_unchanged();
  std::filesystem::resize_file(dir / "m.safetensors", 100);
  try {
    ar.check_unchanged();
    FAIL() << "truncation not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated after validation"), std::string::npos);
  }
}

}  // namespace
}  // namespace g4
