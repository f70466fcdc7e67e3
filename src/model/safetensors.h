// Safetensors checkpoints: a reader that memory-maps one file or a sharded set
// (model.safetensors.index.json), and a streaming writer (used by `g4 synth`).
//
// File format: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to the data section start (8 + N).
// Weights are F32, F16 or BF16; I64 tensors (index tables such as a drafter's token ordering)
// are kept apart, as Int64Tensor, since no weight path can read them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "platform/tensor_view.h"
#include "platform/mapped_file.h"

namespace g4 {

class SafetensorsArchive {
 public:
  // `path` is a .safetensors file, or a directory holding model.safetensors or
  // model.safetensors.index.json (sharded). Every file is mmap'd (no copy of tensor data) and
  // its header fully validated: header length within the file, JSON well-formed, dtype
  // supported, shape and byte range consistent, ranges inside the data section and not
  // overlapping. Throws g4::Error naming the file, the tensor and the offending value.
  static SafetensorsArchive open(const std::filesystem::path& path);

  // nullptr when absent.
  const TensorView* find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // The I64 tensors, which tensors() does not list.
  const std::map<std::string, Int64Tensor>& int64_tensors() const { return int64_tensors_; }
  std::vector<std::filesystem::path> files() const;
  // Sum of the mapped files' data sections (bytes of tensor data available).
  uint64_t data_bytes() const { return data_bytes_; }
  // Throws if any mapped file shrank since it was opened.
  void check_unchanged() const;
  // p lies inside one of the mapped files.
  bool contains(const std::byte* p) const;

 private:
  std::vector<std::unique_ptr<MappedFile>> maps_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, Int64Tensor> int64_tensors_;
  uint64_t data_bytes_ = 0;
};

// Streams tensors to disk one at a time: all names/dtypes/shapes are declared first (the
// header needs every offset), then each tensor's bytes are produced by a callback in order,
// so a multi-GB checkpoint never needs its size in RAM. Writes to "<path>.tmp" and renames
// on success, so an interrupted write never leaves a file that loads.
struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  bool int64 = false;  // an I64 tensor (dtype ignored): 8 bytes per element
  uint64_t nbytes() const;
};

// fill(spec, out) must write exactly spec.nbytes() bytes into out.
using TensorFiller = std::function<void(const TensorSpec& spec, std::byte* out)>;

// Writes one file.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                       const TensorFiller& fill,
                       const std::map<std::string, std::string>& metadata = {});

// Writes `dir/model.safetensors` if the total is <= shard_bytes, else
// `dir/model-0000K-of-0000N.safetensors` shards plus `dir/model.safetensors.index.json`.
// Returns the files written.
std::vector<std::filesystem::path> write_safetensors_sharded(
    const std::filesystem::path& dir, const std::vector<TensorSpec>& specs, const TensorFiller& fill,
    uint64_t shard_bytes);

}  // namespace g4
