// Compiles the file named by G4_INT8_256_KERNELS once per 256-bit int8 tier, as Highway's
// foreach_target does for its targets: a function carries one target attribute, and the AVX2
// build must hold no AVX-VNNI instruction. The kernel file sees G4_Q8_NS (the tier's namespace,
// g4::ops::avx2 or g4::ops::avx_vnni), G4_Q8_TARGET (its target attribute) and G4_Q8_VNNI (1 where
// VEX VPDPBUSD replaces VPMADDUBSW + VPMADDWD). Include after defining G4_INT8_256_KERNELS, at
// global scope, x86-64 only; no include guard, on purpose.
#include "platform/target_attributes.h"

#define G4_Q8_NS avx2
#define G4_Q8_TARGET G4_TARGET_AVX2_FMA_F16C
#define G4_Q8_VNNI 0
#include G4_INT8_256_KERNELS
#undef G4_Q8_NS
#undef G4_Q8_TARGET
#undef G4_Q8_VNNI

#define G4_Q8_NS avx_vnni
#define G4_Q8_TARGET G4_TARGET_AVX2_FMA_F16C_AVXVNNI
#define G4_Q8_VNNI 1
#include G4_INT8_256_KERNELS
#undef G4_Q8_NS
#undef G4_Q8_TARGET
#undef G4_Q8_VNNI

#undef G4_INT8_256_KERNELS
