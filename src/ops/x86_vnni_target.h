// The start of a kernel file written in raw AVX-512 VNNI intrinsics (the K-quant kernels): the
// intrinsics header, the target attribute its kernels carry (G4_VNNI_TARGET; callers check
// gemm_q8_available() first) and the warnings GCC 12 raises inside those intrinsics. Include only
// from .cpp files, first among the includes that use intrinsics: the pragmas hold to the end of
// the including file.
#pragma once
#if defined(__x86_64__)
// GCC 12's AVX-512 headers pass _mm512_undefined_*() into masked builtins, which -Wuninitialized
// reports at every inlined use (GCC bug 105593, fixed in 13). The values are never read.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#define G4_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
#endif
