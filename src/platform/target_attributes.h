// The instruction sets a function is compiled for, one macro per set in use. The rest of the
// build targets plain x86-64; a function carrying one of these may use those instructions and
// runs only after the probe (platform/device.h) has confirmed them. The name spells the set, so
// two functions share a macro exactly when they share a feature list. Each architecture's macros
// exist only in its builds: every use sits under `#if defined(__x86_64__)` or `__aarch64__`.
#pragma once
#if defined(__x86_64__)

#define G4_TARGET_AVX2 __attribute__((target("avx2")))
#define G4_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
#define G4_TARGET_AVX2_FMA_F16C __attribute__((target("avx2,fma,f16c")))
#define G4_TARGET_AVX2_AVXVNNI __attribute__((target("avx2,avxvnni")))
#define G4_TARGET_AVX2_FMA_F16C_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

#define G4_TARGET_AVX512F __attribute__((target("avx512f")))
#define G4_TARGET_AVX512F_BF16 __attribute__((target("avx512f,avx512bf16")))
#define G4_TARGET_AVX512F_VNNI __attribute__((target("avx512f,avx512vnni")))
#define G4_TARGET_AVX512F_BW_BF16_VNNI __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vnni")))
#define G4_TARGET_AVX512F_BW_VL __attribute__((target("avx512f,avx512bw,avx512vl")))
#define G4_TARGET_AVX512F_BW_VL_DQ __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define G4_TARGET_AVX512F_BW_VL_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define G4_TARGET_AVX512F_BW_VL_DQ_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define G4_TARGET_AVX512F_BW_VL_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define G4_TARGET_AVX512F_BW_VL_VNNI_F16C __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))
#define G4_TARGET_AVX512F_BW_VL_VNNI_F16C_FMA __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

#define G4_TARGET_AMX_BF16 __attribute__((target("amx-tile,amx-bf16")))
#define G4_TARGET_AMX_INT8 __attribute__((target("amx-tile,amx-int8")))
#define G4_TARGET_AMX_BF16_INT8 __attribute__((target("amx-tile,amx-bf16,amx-int8")))
// The AMX-INT8 kernel's epilogue scales its int32 sums with AVX-512 in the same function.
#define G4_TARGET_AMX_INT8_AVX512F_BW_VL_F16C \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,f16c")))

#elif defined(__aarch64__)

// SDOT/UDOT. The form GCC's arm_neon.h declares the intrinsics under: "+dotprod" alone is
// refused at inlining as a target mismatch (GCC 12).
#define G4_TARGET_NEON_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

#endif
