// Symmetric int8 rows: how an int8 KV cache stores a (position, head) row, how the cached forward
// pass rounds the step's own rows before they are cached, and how the int8 attention kernel
// rounds its query rows. One function for all three, so a row quantizes the same whichever way it
// reaches the kernel (chunked prefill equals one token at a time, bit for bit).
#pragma once
#include <cstdint>

namespace g4 {

// Returns scale = max|x| / 127; q[i] = x[i] · (1 / scale) clamped to ±127 and rounded to nearest
// even (all 0 when scale is 0). On CPUs with AVX-512 (F, BW, VL) 16 values per instruction, the same
// operations in the same order: bit-identical to the scalar loop for finite x (tested).
float quantize_int8_symmetric(const float* x, int64_t n, int8_t* q);

// The scalar loop alone (the definition the AVX-512 path is tested against).
float quantize_int8_symmetric_scalar(const float* x, int64_t n, int8_t* q);

}  // namespace g4
