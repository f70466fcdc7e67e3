#include "ops/amx/tile_model.h"

#include <cmath>
#include <cstring>

#include "platform/dtype.h"
#include "platform/error.h"

namespace g4::ops {

namespace {

float flush(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

template <class T>
T at(const std::byte* tile, int m, int i) {
  T v;
  std::memcpy(&v, tile + m * kTileRowBytes + int(sizeof(T)) * i, sizeof(T));
  return v;
}

template <class T>
void put(std::byte* tile, int m, int i, T v) {
  std::memcpy(tile + m * kTileRowBytes + int(sizeof(T)) * i, &v, sizeof(T));
}

float bf16_in(const std::byte* tile, int m, int i) {
  uint16_t h = at<uint16_t>(tile, m, i);
  if ((h & 0x7F80) == 0) h &= 0x8000;  // denormal (or zero) in: zero, sign kept
  return bf16_to_f32(h);
}

}  // namespace

void TileRegisterModel::configure(const TileConfig& c) {
  config_ = c;
  std::memset(tiles_, 0, sizeof tiles_);
}

void TileRegisterModel::load(int t, const void* p, size_t stride) {
  require(t, "load");
  std::memset(tiles_[t], 0, sizeof tiles_[t]);
  for (int r = 0; r < rows(t); ++r)
    std::memcpy(tiles_[t] + r * kTileRowBytes, static_cast<const std::byte*>(p) + r * stride, size_t(bytes(t)));
}

void TileRegisterModel::zero(int t) {
  require(t, "zero");
  std::memset(tiles_[t], 0, sizeof tiles_[t]);
}

void TileRegisterModel::store(int t, void* p, size_t stride) const {
  require(t, "store");
  for (int r = 0; r < rows(t); ++r)
    std::memcpy(static_cast<std::byte*>(p) + r * stride, tiles_[t] + r * kTileRowBytes, size_t(bytes(t)));
}

void TileRegisterModel::dpbf16ps(int c, int a, int b) {
  require_chain(c, a, b, "TDPBF16PS");
  for (int m = 0; m < rows(c); ++m)
    for (int k = 0; k < bytes(a) / 4; ++k)
      for (int n = 0; n < bytes(c) / 4; ++n) {
        float s = at<float>(tiles_[c], m, n);
        s = flush(std::fma(bf16_in(tiles_[a], m, 2 * k), bf16_in(tiles_[b], k, 2 * n), s));
        s = flush(std::fma(bf16_in(tiles_[a], m, 2 * k + 1), bf16_in(tiles_[b], k, 2 * n + 1), s));
        put<float>(tiles_[c], m, n, s);
      }
}

void TileRegisterModel::dpbsud(int c, int a, int b) {
  require_chain(c, a, b, "TDPBSUD");
  for (int m = 0; m < rows(c); ++m)
    for (int k = 0; k < bytes(a) / 4; ++k)
      for (int n = 0; n < bytes(c) / 4; ++n) {
        int64_t s = at<int32_t>(tiles_[c], m, n);
        for (int i = 0; i < 4; ++i) s += int64_t(at<int8_t>(tiles_[a], m, 4 * k + i)) * at<uint8_t>(tiles_[b], k, 4 * n + i);
        put<int32_t>(tiles_[c], m, n, int32_t(uint32_t(uint64_t(s))));  // modulo 2^32, as the unit's dword adds
      }
}

std::string TileRegisterModel::shape(int t) const {
  return std::to_string(rows(t)) + " x " + std::to_string(bytes(t)) + " B";
}

void TileRegisterModel::require(int t, const char* op) const {
  if (!rows(t) || !bytes(t))
    throw Error(std::string("software tile model: ") + op + " on tmm" + std::to_string(t) +
                ", which the tile configuration leaves empty");
}

void TileRegisterModel::require_chain(int c, int a, int b, const char* op) const {
  for (int t : {c, a, b}) require(t, op);
  if (rows(c) != rows(a) || bytes(a) != 4 * rows(b) || bytes(c) != bytes(b))
    throw Error(std::string("software tile model: ") + op + " on tiles that do not chain (sums " + shape(c) +
                ", A " + shape(a) + ", B " + shape(b) + ")");
}

}  // namespace g4::ops
