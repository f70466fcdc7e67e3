// One step of a weight product's running sum: sum + x · w, in the variant's arithmetic. Shared by
// matmul.comp, gemv.comp and moe_matvec.comp (after weights.glsl, which widens or dequantizes w).
// - f32 compute (default): fma(x, w, sum), never a * b + c, which a compiler may or may not fuse.
// - f16 compute (COMPUTE_F16, `--compute f16`; the including shader enables float16_t
//   arithmetic): x and the widened or dequantized w are rounded to f16 and multiplied in f16; the
//   product is widened and accumulated in f32. An f32 sum keeps a long row (K in the thousands)
//   from overflowing f16's 65504 and from losing the small products once the sum has grown
//   (f16 has 11 significant bits). `precise` forbids fusing the f16 product into an f32 fma,
//   which would multiply the rounded operands exactly and skip the product's own rounding.
#ifdef COMPUTE_F16
float mac(float x, float w, float sum) {
  precise const float p = float(float16_t(x) * float16_t(w));
  return sum + p;
}
#else
float mac(float x, float w, float sum) { return fma(x, w, sum); }
#endif
