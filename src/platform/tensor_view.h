// A non-owning view of one tensor inside a mapped checkpoint: dtype, shape, pointer.
// Shapes are in the checkpoint's order (HF safetensors: [out, in]; row-major, contiguous).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
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
  // Asks the kernel to start reading rows `rows` of a 2-D tensor now (madvise MADV_WILLNEED on the
  // pages holding each), before a gather reads them one by one: from a mapped checkpoint whose
  // pages are not in the page cache, each row's page fault would otherwise wait for the disk in
  // turn (seconds for a long prefill's per-layer-embedding rows). Advisory: rows
  // already in memory cost one system call each. A single row (a decode step) and interleaved
  // tensors (memory g4 owns) are skipped. Throws g4::Error naming the tensor and its file for a
  // row outside it. Returns how many rows the kernel accepted the advice for.
  int64_t will_read_rows(std::span<const int> rows) const;
  // Where row r starts (row-major layouts; interleaved ones go through interleaved_row).
  const std::byte* row_data(int64_t r) const;
};

// An integer tensor (index tables such as a drafter's token ordering; no weight path reads one):
// little-endian I64 (safetensors, GGUF) or I32 (GGUF) values, read widened with value().
struct Int64Tensor {
  std::string name, file;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // numel() · bytes, not necessarily aligned
  int bytes = 8;                    // 8 (I64) or 4 (I32)
  int64_t numel() const;
  int64_t value(int64_t i) const;  // element i (flat index)
};

std::string shape_str(const std::vector<int64_t>& shape);  // "[4096, 1536]"

}  // namespace g4

namespace g4 {
// View of slice i along the leading dimension (e.g. expert e of an [E, out, in] tensor).
TensorView slice_leading(const TensorView& t, int64_t i);
}  // namespace g4
