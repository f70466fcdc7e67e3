#include "platform/tensor_view.h"

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
  }
  return 0.0f;
}

void TensorView::row_to_f32(int64_t r, float* out) const {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t base = r * cols;
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, data + base * 4, size_t(cols) * 4);
      return;
    case DType::F16: {
      const std::byte* p = data + base * 2;
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, p + c * 2, 2);
        out[c] = f16_to_f32(h);
      }
      return;
    }
    case DType::BF16: {
      const std::byte* p = data + base * 2;
      for (int64_t c = 0; c < cols; ++c) {
        uint16_t h;
        std::memcpy(&h, p + c * 2, 2);
        out[c] = bf16_to_f32(h);
      }
      return;
    }
  }
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
  const uint64_t bytes = uint64_t(s.numel()) * dtype_size(t.dtype);
  s.data = t.data + uint64_t(i) * bytes;
  s.nbytes = bytes;
  s.file_offset = t.file_offset + uint64_t(i) * bytes;
  s.name = t.name + "[" + std::to_string(i) + "]";
  return s;
}
}  // namespace g4
