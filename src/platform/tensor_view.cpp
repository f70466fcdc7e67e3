#include "platform/tensor_view.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "platform/error.h"
#include "platform/row_interleave.h"

namespace g4 {

float TensorView::at(int64_t i) const {
  switch (dtype) {
    case DType::F32: {
      float f;
      std::memcpy(&f, data + i * 4, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return f16_to_f32(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return bf16_to_f32(h);
    }
    case DType::Q8_0_R16:
    case DType::Q4_0_R16:
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::BF16_R16: {  // decode the row holding element i (slow; never on a hot path)
      const int64_t cols = shape.empty() ? 1 : shape.back();
      std::vector<float> row(static_cast<size_t>(cols));
      row_to_f32(i / cols, row.data());
      return row[size_t(i % cols)];
    }
    default: {  // block type: decode the block holding element i (slow; for scalars and norms)
      const int64_t bs = dtype_block_size(dtype);
      float block[256];
      dequantize_row(dtype, data + (i / bs) * int64_t(dtype_block_bytes(dtype)), block, bs);
      return block[i % bs];
    }
  }
}

void TensorView::row_to_f32(int64_t r, float* out) const {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  if (dtype_is_interleaved(dtype)) {  // a gather from an interleaved matrix: one row out of its group
    dequantize_row(interleave_base(dtype), interleaved_row(dtype, data, cols, r), out, cols);
    return;
  }
  dequantize_row(dtype, row_data(r), out, cols);
}

const std::byte* TensorView::row_data(int64_t r) const {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  return data + uint64_t(r) * row_bytes(dtype, cols);
}

int64_t TensorView::will_read_rows(std::span<const int> rows) const {
  const int64_t n_rows = shape.empty() ? 1 : shape.front();
  for (int r : rows)
    if (r < 0 || r >= n_rows)
      throw Error("tensor '" + name + "' " + shape_str(shape) + (file.empty() ? "" : " in " + file) + ": row " +
                  std::to_string(r) + " is outside [0, " + std::to_string(n_rows) + ")");
  // One row: its fault waits for the disk either way. Interleaved rows live in memory g4 owns.
  if (rows.size() < 2 || dtype_is_interleaved(dtype) || shape.size() != 2) return 0;
  const uint64_t rb = row_bytes(dtype, shape.back());
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  int64_t advised = 0;
  for (int r : rows) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(row_data(r)), lo = begin & ~(page - 1);
    if (::madvise(reinterpret_cast<void*>(lo), begin + rb - lo, MADV_WILLNEED) == 0) ++advised;
  }
  return advised;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace g4

namespace g4 {
TensorView slice_leading(const TensorView& t, int64_t i) {
  TensorView s = t;
  s.shape.erase(s.shape.begin());
  const int64_t cols = s.shape.empty() ? 1 : s.shape.back();
  const uint64_t bytes = uint64_t(cols ? s.numel() / cols : 0) * row_bytes(t.dtype, cols);
  s.data = t.data + uint64_t(i) * bytes;
  s.nbytes = bytes;
  s.file_offset = t.file_offset + uint64_t(i) * bytes;
  s.name = t.name + "[" + std::to_string(i) + "]";
  return s;
}
int64_t Int64Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Int64Tensor::value(int64_t i) const {
  if (bytes == 4) {
    int32_t v;
    std::memcpy(&v, data + 4 * i, 4);  // little-endian hosts only, as every other reader here
    return v;
  }
  int64_t v;
  std::memcpy(&v, data + 8 * i, 8);
  return v;
}

}  // namespace g4
