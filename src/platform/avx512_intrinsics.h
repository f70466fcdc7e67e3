// <immintrin.h> for a .cpp file with AVX-512 kernels, without GCC 12's false warnings: its
// AVX-512 headers pass _mm512_undefined_*() into masked builtins, which -Wuninitialized and
// -Wmaybe-uninitialized report at every inlined use (GCC bug 105593, fixed in 13); the values
// are never read. Include only from .cpp files, first among the includes that use intrinsics:
// the pragmas hold to the end of the including file. Nothing on other architectures.
#pragma once
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif
