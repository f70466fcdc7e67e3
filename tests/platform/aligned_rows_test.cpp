// aligned_rows: every row on a 64-byte boundary, the stride whole cache lines and no shorter
// than the row, all rows inside the vector, for element sizes 1/2/4 and widths around a line.
#include "platform/aligned_rows.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace g4 {
namespace {

template <typename T>
void check_rows() {
  constexpr size_t kLine = 64 / sizeof(T);  // elements per cache line
  for (size_t rows : {size_t(1), size_t(3), size_t(8)})
    for (size_t width : {size_t(1), kLine - 1, kLine, kLine + 1, size_t(512), size_t(1000)}) {
      std::vector<T> storage;
      size_t stride = 0;
      T* p = aligned_rows(storage, rows, width, stride);
      EXPECT_GE(stride, width);
      EXPECT_LT(stride, width + kLine);
      EXPECT_EQ(stride * sizeof(T) % 64, 0u) << "stride " << stride;
      for (size_t r = 0; r < rows; ++r) {
        const T* row = p + r * stride;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(row) % 64, 0u) << "row " << r;
        EXPECT_GE(row, storage.data());
        EXPECT_LE(row + width, storage.data() + storage.size()) << "row " << r << " of width " << width;
      }
    }
}

TEST(AlignedRows, EveryRowStartsOnACacheLineInsideTheStorage) {
  check_rows<float>();
  check_rows<uint16_t>();
  check_rows<int8_t>();
}

TEST(AlignedRows, StorageGrowsButNeverShrinks) {
  std::vector<float> storage;
  size_t stride = 0;
  aligned_rows(storage, 4, 100, stride);
  const size_t big = storage.size();
  aligned_rows(storage, 1, 3, stride);
  EXPECT_EQ(storage.size(), big);
  EXPECT_EQ(stride, 16u);
}

}  // namespace
}  // namespace g4
