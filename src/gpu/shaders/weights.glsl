// The weight W[row, col] of a matrix with K values per row, in the format the variant was compiled
// for, as f32. Shared by matmul.comp, embed.comp and moe_matvec.comp; the including shader declares
// nothing named `w`. The buffer at binding 1 is one part of the matrix (a run of whole rows): row
// 0 here is the part's first row. Formats:
// - f32 (WEIGHT_F32), or f16 values (WEIGHT_F16, 16-bit storage);
// - bf16 (WEIGHT_BF16): two 16-bit words per uint (little-endian), widened by a shift;
// - GGUF blocks kept as stored (WEIGHT_Q8_0, WEIGHT_Q4_0, WEIGHT_Q4_1, WEIGHT_Q4_K, WEIGHT_Q5_K,
//   WEIGHT_Q6_K; layouts in src/platform/block_formats.h). A row is K / block values' blocks back
//   to back, so a block may start at any even byte (34-, 18-, 210-byte blocks). Bytes are read
//   from uint words, and f16 fields, always at even offsets, never straddle two words. Each value
//   is decoded with the reference's own operations in its order (block_formats.cpp), so a
//   dequantized value is the bits the CPU reference multiplies.
#if defined(WEIGHT_F16)  // the including shader enables GL_EXT_shader_16bit_storage and float16 types
layout(std430, binding = 1) readonly buffer W { float16_t w[]; };
float weight(uint row, uint col, uint K) { return float(w[row * K + col]); }
#elif defined(WEIGHT_F32)
layout(std430, binding = 1) readonly buffer W { float w[]; };
float weight(uint row, uint col, uint K) { return w[row * K + col]; }
#else
layout(std430, binding = 1) readonly buffer W { uint w[]; };
uint byte_at(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
int int8_at(uint o) { return bitfieldExtract(int(w[o >> 2]), int((o & 3u) * 8u), 8); }  // sign-extended
float half_at(uint o) { return unpackHalf2x16((w[o >> 2] >> ((o & 2u) * 8u)) & 0xffffu).x; }  // o even

#if defined(WEIGHT_BF16)
float weight(uint row, uint col, uint K) {
  const uint i = row * K + col;
  return uintBitsToFloat(((w[i >> 1] >> ((i & 1u) * 16u)) & 0xffffu) << 16);
}
#elif defined(WEIGHT_Q8_0)
// 34 bytes: f16 d, int8 q[32]; x = q · d.
float weight(uint row, uint col, uint K) {
  const uint b = row * (K / 32u) * 34u + (col / 32u) * 34u;
  return float(int8_at(b + 2u + col % 32u)) * half_at(b);
}
#elif defined(WEIGHT_Q4_0)
// 18 bytes: f16 d, 16 bytes of nibbles (byte j: value j low, value j + 16 high); x = (q - 8) · d.
float weight(uint row, uint col, uint K) {
  const uint b = row * (K / 32u) * 18u + (col / 32u) * 18u, j = col % 32u;
  const uint q = (byte_at(b + 2u + j % 16u) >> ((j / 16u) * 4u)) & 15u;
  return float(int(q) - 8) * half_at(b);
}
#elif defined(WEIGHT_Q4_1)
// 20 bytes: f16 d, f16 m, 16 bytes of nibbles (as Q4_0); x = q · d + m.
float weight(uint row, uint col, uint K) {
  const uint b = row * (K / 32u) * 20u + (col / 32u) * 20u, j = col % 32u;
  const uint q = (byte_at(b + 4u + j % 16u) >> ((j / 16u) * 4u)) & 15u;
  return float(q) * half_at(b) + half_at(b + 2u);
}
#elif defined(WEIGHT_Q4_K) || defined(WEIGHT_Q5_K)
// Q4_K, 144 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
// (bytes 32c..32c+31: sub-block 2c low, 2c + 1 high); x = (d · sc) · q - dmin · m.
// Q5_K, 176 bytes: the same with 32 bytes of fifth bits (qh) before the nibbles: bit s of qh[l]
// is value l of sub-block s's fifth bit (16).
#ifdef WEIGHT_Q5_K
const uint kBlockBytes = 176u, kNibblesAt = 48u;
#else
const uint kBlockBytes = 144u, kNibblesAt = 16u;
#endif
float weight(uint row, uint col, uint K) {
  const uint b = row * (K / 256u) * kBlockBytes + (col / 256u) * kBlockBytes, j = col % 256u, s = j / 32u;
  const uint sb = b + 4u;  // the scale bytes
  uint sc, m;
  if (s < 4u) {
    sc = byte_at(sb + s) & 63u;
    m = byte_at(sb + s + 4u) & 63u;
  } else {
    sc = (byte_at(sb + s + 4u) & 15u) | ((byte_at(sb + s - 4u) >> 6) << 4);
    m = (byte_at(sb + s + 4u) >> 4) | ((byte_at(sb + s) >> 6) << 4);
  }
  uint q = (byte_at(b + kNibblesAt + (s / 2u) * 32u + j % 32u) >> ((s & 1u) * 4u)) & 15u;
#ifdef WEIGHT_Q5_K
  q += ((byte_at(b + 16u + j % 32u) >> s) & 1u) * 16u;
#endif
  const float d1 = half_at(b) * float(sc), m1 = half_at(b + 2u) * float(m);
  return d1 * float(q) - m1;
}
#elif defined(WEIGHT_Q6_K)
// 210 bytes: ql[128] low nibbles, qh[64] high bit pairs, int8 scales[16], f16 d; two halves of 128
// values, each four groups of 32 (ql bytes l or l + 32, low or high nibble; qh bits 2g);
// x = d · sc · (q - 32).
float weight(uint row, uint col, uint K) {
  const uint b = row * (K / 256u) * 210u + (col / 256u) * 210u, j = col % 256u;
  const uint h = j / 128u, g = (j % 128u) / 32u, l = j % 32u;
  const uint lo = (byte_at(b + h * 64u + (g & 1u) * 32u + l) >> ((g / 2u) * 4u)) & 15u;
  const uint hi = (byte_at(b + 128u + h * 32u + l) >> (2u * g)) & 3u;
  const int sc = int8_at(b + 192u + h * 8u + l / 16u + 2u * g);
  return half_at(b + 208u) * float(sc) * float(int(lo | (hi << 4)) - 32);
}
#else
#error "define one WEIGHT_ format"
#endif
#endif
