#include "engine/kv_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "platform/dtype.h"
#include "platform/error.h"
#include "platform/quantize_int8.h"

namespace g4 {

const char* kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::F32: return "f32";
    case KvDType::F16: return "f16";
    case KvDType::BF16: return "bf16";
    case KvDType::Int8: return "int8";
  }
  return "?";
}

KvDType kv_dtype_from_name(const std::string& n) {
  if (n == "f32") return KvDType::F32;
  if (n == "f16") return KvDType::F16;
  if (n == "bf16") return KvDType::BF16;
  if (n == "int8" || n == "q8") return KvDType::Int8;
  throw Error("KV cache dtype '" + n + "': expected f32, f16, bf16 or int8");
}

uint64_t kv_row_bytes(KvDType t, int64_t kv_heads, int64_t head_dim) {
  const uint64_t n = uint64_t(kv_heads * head_dim);
  switch (t) {
    case KvDType::F32: return 4 * n;
    case KvDType::F16:
    case KvDType::BF16: return 2 * n;
    case KvDType::Int8: return n + 4 * uint64_t(kv_heads);
  }
  return 0;
}

KvRows::KvRows(KvDType dtype, int64_t rows, int64_t kv_heads, int64_t head_dim)
    : dtype_(dtype), kv_heads_(kv_heads), head_dim_(head_dim) {
  const size_t n = size_t(rows * kv_heads * head_dim);
  switch (dtype) {
    case KvDType::F32: f32_.assign(n, 0.0f); break;
    case KvDType::F16:
    case KvDType::BF16: half_.assign(n, 0); break;
    case KvDType::Int8:
      q_.assign(n, 0);
      scales_.assign(size_t(rows * kv_heads), 0.0f);
      break;
  }
}

uint64_t KvRows::bytes() const {
  return f32_.size() * 4 + half_.size() * 2 + q_.size() + scales_.size() * 4;
}

const void* KvRows::row_data(int64_t row) const {
  const size_t base = size_t(row * kv_heads_ * head_dim_);
  switch (dtype_) {
    case KvDType::F32: return f32_.data() + base;
    case KvDType::F16:
    case KvDType::BF16: return half_.data() + base;
    case KvDType::Int8: return q_.data() + base;
  }
  return nullptr;
}

const float* KvRows::row_scales(int64_t row) const {
  return dtype_ == KvDType::Int8 ? scales_.data() + size_t(row * kv_heads_) : nullptr;
}

void KvRows::write(int64_t row, const float* src) {
  const int64_t w = kv_heads_ * head_dim_;
  const size_t base = size_t(row * w);
  switch (dtype_) {
    case KvDType::F32: std::memcpy(&f32_[base], src, size_t(w) * 4); break;
    case KvDType::F16:
      for (int64_t i = 0; i < w; ++i) half_[base + size_t(i)] = f32_to_f16(src[i]);
      break;
    case KvDType::BF16:
      for (int64_t i = 0; i < w; ++i) half_[base + size_t(i)] = f32_to_bf16(src[i]);
      break;
    case KvDType::Int8:
      // Symmetric per (token, head): scale = max|x| / 127.
      for (int64_t h = 0; h < kv_heads_; ++h)
        scales_[size_t(row * kv_heads_ + h)] =
            quantize_int8_symmetric(src + h * head_dim_, head_dim_, &q_[base + size_t(h * head_dim_)]);
      break;
  }
}

void KvRows::copy_rows(int64_t dst_row, const KvRows& src, int64_t src_row, int64_t n) {
  if (src.dtype_ != dtype_ || src.kv_heads_ != kv_heads_ || src.head_dim_ != head_dim_)
    throw Error("KV rows: copy between rows of different types or shapes");
  const size_t w = size_t(kv_heads_ * head_dim_), d = size_t(dst_row) * w, s = size_t(src_row) * w, c = size_t(n) * w;
  switch (dtype_) {
    case KvDType::F32: std::copy_n(src.f32_.begin() + std::ptrdiff_t(s), c, f32_.begin() + std::ptrdiff_t(d)); break;
    case KvDType::F16:
    case KvDType::BF16: std::copy_n(src.half_.begin() + std::ptrdiff_t(s), c, half_.begin() + std::ptrdiff_t(d)); break;
    case KvDType::Int8:
      std::copy_n(src.q_.begin() + std::ptrdiff_t(s), c, q_.begin() + std::ptrdiff_t(d));
      std::copy_n(src.scales_.begin() + src_row * kv_heads_, size_t(n * kv_heads_), scales_.begin() + dst_row * kv_heads_);
      break;
  }
}

void KvRows::read(int64_t row, float* dst) const {
  const int64_t w = kv_heads_ * head_dim_;
  const size_t base = size_t(row * w);
  switch (dtype_) {
    case KvDType::F32: std::memcpy(dst, &f32_[base], size_t(w) * 4); break;
    case KvDType::F16:
      for (int64_t i = 0; i < w; ++i) dst[i] = f16_to_f32(half_[base + size_t(i)]);
      break;
    case KvDType::BF16:
      for (int64_t i = 0; i < w; ++i) dst[i] = bf16_to_f32(half_[base + size_t(i)]);
      break;
    case KvDType::Int8:
      for (int64_t h = 0; h < kv_heads_; ++h) {
        const float scale = scales_[size_t(row * kv_heads_ + h)];
        const int8_t* q = &q_[base + size_t(h * head_dim_)];
        for (int64_t d = 0; d < head_dim_; ++d) dst[h * head_dim_ + d] = float(q[d]) * scale;
      }
      break;
  }
}

}  // namespace g4
