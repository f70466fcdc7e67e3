// A non-owning view of one tensor inside a mapped checkpoint: dtype, shape, pointer.
// Shapes are in the checkpoint's order (HF safetensors: [out, in]; row-major, contiguous).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "platform/dtype.h"

namespace g4 {

struct TensorView {
  std::string name;            // full name as stored, e.g. "model.language_model.norm.weight"
  std::string file;            // file it lives in (for error messages)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major, contiguous
  const std::byte* data = nullptr;
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;    // absolute offset of data in `file`

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Element i (flat index) converted to f32 (block types decode the block holding it).
  float at(int64_t i) const;
  // Row r of a 2-D (or leading-dim-flattened) tensor, converted into out[0..cols).
  // Block types are dequantized (a row is always a whole number of blocks: loaders refuse others).
  void row_to_f32(int64_t r, float* out) const;
};

std::string shape_str(const std::vector<int64_t>& shape);  // "[4096, 1536]"

}  // namespace g4

namespace g4 {
// View of slice i along the leading dimension (e.g. expert e of an [E, out, in] tensor).
TensorView slice_leading(const TensorView& t, int64_t i);
}  // namespace g4
