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
// AVX-512 with AVX512_BF16 and AMX confirmed (permission granted, self-tests passed); L1d 48 KiB, L2 2 MiB.
DeviceInfo sapphire_rapids();
// sapphire_rapids() where the OS refused AMX tile state or the AMX self-test failed.
DeviceInfo sapphire_rapids_amx_refused();
DeviceInfo sapphire_rapids_amx_selftest_failed();
// No SIMD beyond SSE2 (an old or emulated CPU).
DeviceInfo baseline_x86();
// Any of the CPU presets with different cache sizes (tile planner tests).
DeviceInfo with_caches(DeviceInfo device, uint64_t l1d_bytes, uint64_t l2_bytes);

}  // namespace g4::presets
