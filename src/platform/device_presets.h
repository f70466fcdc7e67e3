// DeviceInfo records for devices g4 is tested against but this machine is not: the policy and
// tile-planner tables run on every machine with the same inputs.
#pragma once
#include <cstdint>
#include <string>

#include "platform/device.h"

namespace g4::presets {

// Largest shared memory one CUDA block may opt into, by compute capability (bytes).
// sm_75: 64 KiB, sm_80: 163 KiB, sm_86/89: 99 KiB, sm_90: 227 KiB; 48 KiB (the default) if unknown.
uint64_t cuda_max_smem_per_block(int major, int minor);

DeviceInfo cuda_device(std::string name, int major, int minor, int sm_count, uint64_t memory_bytes);
DeviceInfo t4_sm75();    // Turing: f16 tensor cores, no bf16
DeviceInfo l4_sm89();    // Ada: bf16 and fp8
DeviceInfo h100_sm90();  // Hopper

// AVX2 + FMA + F16C, no AVX-512, no bf16; L1d 32 KiB, L2 1.25 MiB per core.
DeviceInfo avx2_laptop();
// x86 CPU profiles by their int8 and bf16 units, for the policy's profile tests (caches typical):
// Zen 2 / Zen 3: AVX2 + FMA + F16C only; Alder Lake (client): + AVX-VNNI confirmed; Ice Lake
// (server): AVX-512 with AVX512_VNNI, no bf16; Zen 4 / Zen 5: AVX-512 VNNI and BF16.
DeviceInfo zen3();
DeviceInfo alder_lake();
DeviceInfo ice_lake();
DeviceInfo zen4();
// AVX-512 with AVX512_BF16 and AMX confirmed (permission granted, self-tests passed); L1d 48 KiB, L2 2 MiB.
DeviceInfo sapphire_rapids();
// sapphire_rapids() where the OS refused AMX tile state or the AMX self-test failed.
DeviceInfo sapphire_rapids_amx_refused();
DeviceInfo sapphire_rapids_amx_selftest_failed();
// No SIMD beyond SSE2 (an old or emulated CPU).
DeviceInfo baseline_x86();
// aarch64 profiles (arch Aarch64, NEON and FP16 arithmetic in each) by their int8, bf16 and SVE
// units: Neoverse N1 (Graviton2, Ampere Altra): dotprod; Neoverse V1 (Graviton3): dotprod, i8mm,
// bf16, SVE (256-bit); Neoverse V2 (Grace, Graviton4): V1 + SVE2 (128-bit); Apple M2: dotprod, i8mm,
// bf16, no SVE (its L2 is shared by a cluster: the figure is a P-core's share).
DeviceInfo neoverse_n1();
DeviceInfo neoverse_v1();
DeviceInfo neoverse_v2();
DeviceInfo apple_m2();
// Any of the CPU presets with different cache sizes (tile planner tests).
DeviceInfo with_caches(DeviceInfo device, uint64_t l1d_bytes, uint64_t l2_bytes);

}  // namespace g4::presets
