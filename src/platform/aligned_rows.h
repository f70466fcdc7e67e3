// Rows that start on 64-byte cache lines, carved out of a std::vector the caller keeps (often
// thread_local, so it is allocated once per thread and reused).
//
// Why: a kernel that loads 64-byte vectors from a row at malloc's 16-byte offset splits every
// load across two cache lines, a large share of the attention score loop's time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace g4 {

// `rows` rows of `width` elements of T in `storage`, row r at the returned pointer + r * stride,
// every row on a 64-byte boundary: stride (returned through `stride`) is `width` rounded up to
// whole cache lines. `storage` grows as needed (never shrinks); the rows stay valid until its
// next resize. Contents are whatever the storage held.
template <typename T>
T* aligned_rows(std::vector<T>& storage, size_t rows, size_t width, size_t& stride) {
  static_assert(64 % sizeof(T) == 0, "cache-line rows need an element size dividing 64");
  constexpr size_t kPerLine = 64 / sizeof(T);
  stride = (width + kPerLine - 1) / kPerLine * kPerLine;
  const size_t need = rows * stride + kPerLine;  // + one line of slack to move to a boundary
  if (storage.size() < need) storage.resize(need);
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
}

}  // namespace g4
