// A software model of the eight AMX tile registers, for testing the tile kernels on CPUs without
// AMX (gemm_bf16_tiles.h, gemm_q8_tiles.h run the same kernel code on it). Follows the SDM:
//  - a load fills the configured rows and bytes per row and zeroes the rest of the register;
//  - TDPBF16PS adds, per element and in order of the pairs, the even then the odd product (bf16
//    products are exact in f32, so each add is one fused multiply-add, round to nearest even);
//    denormal inputs read as zero, denormal sums are flushed to zero;
//  - TDPBSUD adds, per element, the four products of a signed byte of A and an unsigned byte of
//    B to the int32 sum (exact; wraps modulo 2^32 as the hardware does).
// Naming a tile the configuration leaves empty, or shapes that do not chain, throws g4::Error:
// the hardware faults there. Slow (a scalar loop per multiply-add): for tests only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "platform/amx_tile_config.h"

namespace g4::ops {

class TileRegisterModel {
 public:
  void configure(const TileConfig& c);
  void load(int t, const void* p, size_t stride);
  void zero(int t);
  void store(int t, void* p, size_t stride) const;
  void dpbf16ps(int c, int a, int b);  // tmm c += tmm a (bf16 pairs) · tmm b (bf16 pairs), f32 sums
  void dpbsud(int c, int a, int b);    // tmm c += tmm a (int8 quads) · tmm b (uint8 quads), int32 sums

 private:
  int rows(int t) const { return config_.rows[t]; }
  int bytes(int t) const { return config_.bytes_per_row[t]; }
  std::string shape(int t) const;
  void require(int t, const char* op) const;
  void require_chain(int c, int a, int b, const char* op) const;

  TileConfig config_;
  alignas(64) std::byte tiles_[8][kTileRows * kTileRowBytes] = {};
};

}  // namespace g4::ops
