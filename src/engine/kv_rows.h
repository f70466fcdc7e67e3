// KvRows: a fixed number of K or V rows ([rows, kv_heads, head_dim]) stored as f32, f16, bf16,
// or int8 with one f32 scale per (row, head). The unit both ring slots and cache blocks use.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace g4 {

enum class KvDType { F32, F16, BF16, Int8 };

const char* kv_dtype_name(KvDType t);
KvDType kv_dtype_from_name(const std::string& name);  // "f32", "f16", "bf16", "int8"; throws g4::Error
// Bytes one row of `kv_heads x head_dim` values takes (int8 includes its per-head scales).
uint64_t kv_row_bytes(KvDType t, int64_t kv_heads, int64_t head_dim);

class KvRows {
 public:
  KvRows(KvDType dtype, int64_t rows, int64_t kv_heads, int64_t head_dim);
  void write(int64_t row, const float* src);  // src: [kv_heads, head_dim]
  void read(int64_t row, float* dst) const;   // dst: [kv_heads, head_dim]
  // Rows [src_row, src_row + n) of `src` (same dtype and row shape) into [dst_row, dst_row + n),
  // as stored: no conversion, so the copy is bit for bit.
  void copy_rows(int64_t dst_row, const KvRows& src, int64_t src_row, int64_t n);
  uint64_t bytes() const;
  KvDType dtype() const { return dtype_; }
  // The stored elements of `row` ([kv_heads, head_dim] of the stored type: float, uint16_t f16/bf16
  // bits or int8; rows are contiguous, so row r + 1 follows row r) and, for int8, its [kv_heads]
  // scales (nullptr for the other types). Valid while this object lives; never reallocated.
  const void* row_data(int64_t row) const;
  const float* row_scales(int64_t row) const;

 private:
  KvDType dtype_;
  int64_t kv_heads_, head_dim_;
  std::vector<float> f32_;
  std::vector<uint16_t> half_;
  std::vector<int8_t> q_;
  std::vector<float> scales_;  // int8: [rows, kv_heads]
};

}  // namespace g4
