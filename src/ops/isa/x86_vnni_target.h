// The start of a kernel file written in raw AVX-512 VNNI intrinsics (the K-quant kernels): the
// intrinsics header, the target attribute its kernels carry (G4_VNNI_TARGET; callers check
// gemm_q8_available() first) and the warnings GCC 12 raises inside those intrinsics. Include only
// from .cpp files, first among the includes that use intrinsics: the pragmas hold to the end of
// the including file.
#pragma once
#if defined(__x86_64__)
#include "platform/avx512_intrinsics.h"

#define G4_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
#endif
