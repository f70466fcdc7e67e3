// GGUF (llama.cpp) checkpoints: a memory-mapped reader for version 3, little-endian files.
//
// Layout: "GGUF" magic, u32 version, u64 tensor_count, u64 kv_count; kv_count metadata entries
// (string key, u32 value type, value); tensor_count tensor infos (string name, u32 n_dims,
// n_dims × u64 ne, u32 ggml type, u64 offset); padding to `general.alignment` (default 32);
// the data section. Strings are u64 length + bytes; arrays are u32 element type + u64 count +
// elements (arrays may nest). Tensor `ne` is innermost-first ([in, out] for a matrix); views
// are exposed in row-major order ([out, in], as Hugging Face stores them).
//
// Every length and count is checked against the bytes left in the file before anything is
// allocated or read; tensor data must be aligned, in range, consistent with type and shape,
// and not overlap another tensor. Errors name the file, the byte offset and the key or tensor.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/mapped_file.h"
#include "platform/tensor_view.h"

namespace g4 {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);
// Bytes of one scalar of type t in the file (0 for STRING and ARRAY, which have no fixed size).
size_t gguf_scalar_size(GgufType t);

// One metadata value. Scalars are widened (integers to int64/uint64, floats to double);
// strings and numeric arrays view the mapped file (valid while the GgufFile lives).
struct GgufValue {
  GgufType type = GgufType::U8;
  uint64_t offset = 0;        // file offset of the value (for error messages)
  int64_t i = 0;              // integer and bool scalars (u64 above INT64_MAX: see u)
  uint64_t u = 0;
  double f = 0;               // float scalars (integers too, for convenience)
  std::string_view str;       // STRING
  // ARRAY
  GgufType elem_type = GgufType::U8;
  uint64_t count = 0;
  const std::byte* elems = nullptr;            // numeric/bool arrays: packed little-endian values
  std::vector<std::string_view> strings;       // string arrays
  std::vector<GgufValue> arrays;               // arrays of arrays

  bool is_int() const;    // integer or bool scalar
  bool is_float() const;  // F32 / F64 scalar
  bool is_numeric_array() const;
  // Element k of a numeric or bool array.
  int64_t int_at(uint64_t k) const;
  double float_at(uint64_t k) const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (row) dimension
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;  // ignored for integer tensors
  int int_bytes = 0;        // 4 (ggml I32) or 8 (I64) for an integer tensor, else 0
  uint64_t offset = 0;      // relative to the data section
  uint64_t info_offset = 0; // where its tensor info starts in the file
};

class GgufFile {
 public:
  // Maps and fully validates `path`. Throws g4::Error naming the file, byte offset and item.
  static std::unique_ptr<GgufFile> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return map_.path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t data_bytes() const { return map_.size() - data_offset_; }
  uint64_t file_size() const { return map_.size(); }

  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const;
  const std::vector<GgufTensorInfo>& tensor_infos() const { return infos_; }
  // Views by GGUF name, shape in row-major order (ne reversed).
  // Weights only: I32/I64 tensors (index tables) are in int_tensors().
  const std::map<std::string, TensorView>& tensors() const { return views_; }
  const std::map<std::string, Int64Tensor>& int_tensors() const { return int_views_; }

  void check_unchanged() const { map_.check_unchanged(); }
  // p lies inside the mapped file.
  bool contains(const std::byte* p) const { return p >= map_.data() && p < map_.data() + map_.size(); }

  // Typed metadata access; throws naming the key and offset when present with a wrong type.
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;  // accepts integers too
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;

 private:
  GgufFile() = default;
  MappedFile map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> infos_;
  std::map<std::string, TensorView> views_;
  std::map<std::string, Int64Tensor> int_views_;
};

// True when `path` names a file that starts with the GGUF magic (or ends in .gguf).
bool looks_like_gguf(const std::filesystem::path& path);

}  // namespace g4
