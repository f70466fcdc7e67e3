// Writes GGUF version 3 files (little-endian, 32-byte alignment): metadata in insertion order,
// then tensor infos, then tensor data produced one tensor at a time by a callback, so a large
// model never needs its size in RAM. Written to "<path>.tmp" and renamed on success.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "platform/dtype.h"

namespace g4 {

class GgufWriter {
 public:
  // Metadata (a key set twice keeps its first position and takes the new value).
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_array_i32(const std::string& key, const std::vector<int32_t>& v);
  void set_array_u32(const std::string& key, const std::vector<uint32_t>& v);
  void set_array_f32(const std::string& key, const std::vector<float>& v);
  void set_array_bool(const std::string& key, const std::vector<bool>& v);
  void set_array_string(const std::string& key, const std::vector<std::string>& v);
  // Copies one value read from another GGUF (any type, nested arrays included).
  void set_value(const std::string& key, const GgufValue& v);

  // `shape` is row-major (HF [out, in]); the file stores ne reversed. The row length
  // (last dim) must be a multiple of the dtype's block size.
  void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape);
  // An I64 tensor (ggml type 27: index tables such as a drafter's token ordering).
  void add_i64_tensor(const std::string& name, const std::vector<int64_t>& shape);
  // fill(index, out) writes tensor `index`'s bytes (row_bytes × rows) into out.
  using Filler = std::function<void(size_t index, std::byte* out)>;
  void write(const std::filesystem::path& path, const Filler& fill) const;

  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes;
    bool i64 = false;  // dtype ignored
  };
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  void put(const std::string& key, std::string bytes);
  std::vector<std::pair<std::string, std::string>> kv_;  // key -> serialized type + value
  std::vector<Tensor> tensors_;
};

// The gemma4.* metadata (architecture, geometry, RoPE, layer pattern, per-layer arrays,
// MoE) llama.cpp's converter writes for config c, plus general.architecture/name. `arch` is
// "gemma4-assistant" for a drafter, whose keys llama.cpp's converter writes the same way.
void add_gemma4_metadata(GgufWriter& w, const ModelConfig& c, const std::string& name,
                         const std::string& arch = "gemma4");

// rope_freqs.weight values for config c: 1.0 on the rotated pairs of full layers, 1e30 after.
std::vector<float> gemma4_rope_freqs(const ModelConfig& c);

}  // namespace g4

namespace g4 {
struct Model;

// `g4 quantize`: writes model m as a gemma4 GGUF. 2-D and 3-D weight matrices whose row length
// is a multiple of the type's block size are stored as `type`; K-quant matrices whose rows are
// not a multiple of 256 fall back to Q8_0 (when a multiple of 32), anything else to F32. Norms,
// scalars and 1-D tensors stay F32. rope_freqs.weight is generated from the config.
// `extra` may add metadata (the CLI adds the tokenizer). Atomic (temp file + rename).
struct GgufExportReport {
  std::map<std::string, uint64_t> tensors_by_dtype;  // "Q4_K" -> count
  uint64_t bytes = 0;                                 // tensor data written
  std::vector<std::string> notes;
};
// Uniform: every matrix as `type`. Q4_K_M: llama.cpp's mix of that name (`type` must be Q4_K),
// per q4_k_m_types.
enum class QuantMix { Uniform, Q4_K_M };
GgufExportReport write_model_gguf(const Model& m, DType type, const std::filesystem::path& out,
                                  const std::function<void(GgufWriter&)>& extra = {}, QuantMix mix = QuantMix::Uniform);

// The dtype `view` is stored as when `want` is asked for: 1-D tensors F32; matrices `want` where
// their rows are whole blocks of it, else Q8_0 (when `type` is quantized; counted in fallback_q8)
// or F32 (counted in fallback_f32).
DType gguf_stored_dtype(const TensorView& view, DType want, DType type, int& fallback_q8, int& fallback_f32);
// Tensor s, row by row through f32, encoded as `dtype` into dst (row_bytes(dtype, cols) per row).
void encode_tensor_rows(const TensorView& s, DType dtype, std::byte* dst, std::vector<float>& row);

// The report's notes on the fallbacks gguf_stored_dtype counted, and its byte total from w.
void finish_export_report(GgufExportReport& rep, const GgufWriter& w, DType type, int fallback_q8, int fallback_f32);

// llama.cpp's Q4_K_M choice for each of these gemma4 GGUF tensor names: Q6_K for output.weight
// (or token_embd.weight when there is no output.weight: the tied head), and for the attn_v and
// ffn_down matrices that llama.cpp's "more bits" rule picks (counting each kind's tensors in
// layer order: the first and last eighth, and every third in between); Q4_K for every other name.
std::map<std::string, DType> q4_k_m_types(const std::vector<std::string>& gguf_names);
}  // namespace g4
