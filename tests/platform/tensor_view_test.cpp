// TensorView::will_read_rows: the read-ahead a gather of many rows from a mapped checkpoint asks
// for first. Checked against the page cache itself (mincore), where the file system lets a test
// evict the file's pages; the bad-row refusals everywhere.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/error.h"
#include "platform/mapped_file.h"
#include "platform/tensor_view.h"
#include "test_util.h"

namespace g4 {
namespace {

constexpr int64_t kRows = 64, kCols = 8192;  // bf16: 16 KiB a row, whole pages

// A [kRows, kCols] bf16 tensor file whose byte i is (i * 7) & 0xFF.
std::vector<char> write_rows(const std::filesystem::path& p) {
  std::vector<char> bytes(size_t(kRows * kCols * 2));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char((i * 7) & 0xFF);
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return bytes;
}

TensorView view_of(const MappedFile& f) {
  TensorView v;
  v.name = "model.embed_tokens_per_layer.weight";
  v.file = "model-00002-of-00003.safetensors";
  v.dtype = DType::BF16;
  v.shape = {kRows, kCols};
  v.data = f.data();
  v.nbytes = f.size();
  return v;
}

// Whether every page of row r is in the page cache.
bool row_resident(const MappedFile& f, int64_t r) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const int64_t row = kCols * 2;
  std::vector<unsigned char> in(size_t((row + page - 1) / page));
  auto* p = const_cast<std::byte*>(f.data() + r * row);
  if (::mincore(p, size_t(row), in.data()) != 0) return false;
  for (unsigned char b : in)
    if (!(b & 1)) return false;
  return true;
}

TEST(TensorView, WillReadRowsAdvisesEachRowAndReadsNothingDifferent) {
  test::TempDir dir;
  const std::vector<char> bytes = write_rows(dir / "t.bin");
  MappedFile f(dir / "t.bin");
  const TensorView v = view_of(f);
  const std::vector<int> rows{0, 5, 63, 5};
  EXPECT_EQ(v.will_read_rows(rows), 4);
  EXPECT_EQ(std::memcmp(f.data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(v.will_read_rows(std::vector<int>{7}), 0);  // one row: nothing to overlap
  TensorView interleaved = v;  // rows interleaved in memory g4 owns: nothing to ask of a file
  interleaved.dtype = DType::Q4_0_R16;
  EXPECT_EQ(interleaved.will_read_rows(rows), 0);
}

TEST(TensorView, WillReadRowsRefusesARowOutsideTheTensor) {
  test::TempDir dir;
  write_rows(dir / "t.bin");
  MappedFile f(dir / "t.bin");
  const TensorView v = view_of(f);
  for (int bad : {-1, int(kRows), 1 << 30}) {
    try {
      v.will_read_rows(std::vector<int>{3, bad});
      ADD_FAILURE() << "row " << bad << " accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("embed_tokens_per_layer"), std::string::npos) << what;
      EXPECT_NE(what.find("model-00002-of-00003.safetensors"), std::string::npos) << what;
      EXPECT_NE(what.find("row " + std::to_string(bad)), std::string::npos) << what;
    }
  }
}

// Rows evicted from the page cache are read back in after the advice, without being touched.
TEST(TensorView, WillReadRowsBringsEvictedRowsIntoThePageCache) {
  test::TempDir dir;
  write_rows(dir / "t.bin");
  {
    const int fd = ::open((dir / "t.bin").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  MappedFile f(dir / "t.bin");
  const TensorView v = view_of(f);
  if (row_resident(f, 10) || row_resident(f, 40))
    GTEST_SKIP() << "this file system kept the file's pages in memory (tmpfs?): nothing to observe";
  EXPECT_EQ(v.will_read_rows(std::vector<int>{10, 40}), 2);
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(row_resident(f, 10) && row_resident(f, 40)) && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(row_resident(f, 10));
  EXPECT_TRUE(row_resident(f, 40));
}

}  // namespace
}  // namespace g4
