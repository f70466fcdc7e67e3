// One-time checks that an optional unit (AMX tiles, AVX512_BF16) computes on this CPU what the
// scalar path computes: a small product of exact small integers, compared bit for bit.
// Each check runs under run_catching_sigill, so a CPU or OS that refuses the instruction yields
// SelfTestOutcome::Failed instead of killing the process. probe_cpu() calls them only after
// cpuid and the OS (XCR0, AMX permission) have both said yes; tests call them directly to prove
// the guard on machines without the unit.
#pragma once
#include "platform/device.h"

namespace g4 {

// 16x16 f32 += [16x32 bf16] x [32x16 bf16] with TDPBF16PS.
SelfTest check_amx_bf16_tile_product();
// 16x16 i32 += [16x64 s8] x [64x16 s8] with TDPBSSD.
SelfTest check_amx_int8_tile_product();
// 16 f32 lanes += pairwise bf16 dot products with VDPBF16PS.
SelfTest check_avx512_bf16_dot();
// 16 i32 lanes += u8 x s8 quad dot products with VPDPBUSD (no saturation).
SelfTest check_avx512_vnni_dot();
// 8 i32 lanes += u8 x s8 quad dot products with the VEX-encoded (AVX-VNNI) VPDPBUSD.
SelfTest check_avx_vnni_dot();

}  // namespace g4
