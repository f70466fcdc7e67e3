// The dtype policy: which number formats g4 computes in, stores weights in and keeps the KV cache
// in, resolved as a pure function of (device, checkpoint, user request), each decision with its
// reason (docs/lessons.md, lesson 1: bf16 on a device without a bf16 datapath is silently slow).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "platform/device.h"
#include "platform/dtype.h"

namespace g4 {

// Formats a policy can name. Compute: F32/F16/BF16. KV: F32/F16/BF16/F8E4M3. Weights: all.
enum class NumFormat : uint8_t { F32, F16, BF16, F8E4M3, Q8, Q4 };

std::string_view num_format_name(NumFormat f);  // "f32", "f16", "bf16", "fp8", "q8", "q4"
std::optional<NumFormat> num_format_from_name(std::string_view name);  // accepts the names above, any case
// Throws g4::Error naming `what` (e.g. "--compute") and the accepted names.
NumFormat parse_num_format(std::string_view name, std::string_view what);

// What the user forced (CLI flags / server config); unset fields are resolved from the device.
struct UserRequest {
  std::optional<NumFormat> compute;
  std::optional<NumFormat> kv;
  std::optional<NumFormat> weights;
};

struct DevicePolicy {
  NumFormat compute = NumFormat::F32;
  NumFormat weights = NumFormat::F32;
  NumFormat kv = NumFormat::F32;
  // What the activations are multiplied in: q8 (int8 blocks of 32) for q8/q4 weights where the
  // CPU has an integer dot product (AVX2 and up), otherwise the compute format.
  NumFormat activations = NumFormat::F32;
  // Matmul kernel family, best first: "amx-bf16", "avx512-bf16", "avx512", "avx2-fma", "scalar";
  // on aarch64 "neon" (Highway's NEON target, f32 math) or "scalar"; on CUDA "cuda-tc-bf16",
  // "cuda-tc-f16", "cuda-f32".
  std::string kernel_family;
  std::string compute_reason;
  std::string weights_reason;
  std::string kv_reason;
  std::string kernel_reason;
  std::string activations_reason;
  std::vector<std::string> warnings;  // forced choices the device only emulates, with their cost

  // The five reasons in order compute, weights, kv, kernel, activations.
  std::vector<std::string> reasons() const {
    return {compute_reason, weights_reason, kv_reason, kernel_reason, activations_reason};
  }
};

// The policy's name for a checkpoint's weight dtype: F32/F16/BF16 as themselves, Q8_0 as q8,
// the 4- to 6-bit block types as q4.
NumFormat checkpoint_format(DType d);

// What the device executes natively (used by the policy and by tests).
bool has_native_bf16(const DeviceInfo& device);  // CPU: confirmed AMX-BF16 or AVX512_BF16; GPU: sm_80+
bool has_native_f16_math(const DeviceInfo& device);  // CPU: AVX512_FP16 (aarch64 FP16: no kernel); GPU: sm_70+
bool has_native_fp8(const DeviceInfo& device);   // GPU sm_89+; no CPU
// CPU: an integer dot product of u8 x s8 (DeviceInfo::int8_dot: AVX2, AVX-VNNI or AVX512_VNNI; never on
// aarch64, whose SDOT/SMMLA have no g4 kernel yet); GPU: sm_61+ (dp4a)
bool has_native_int8_dot(const DeviceInfo& device);

// Pure: same inputs, same policy. Throws g4::Error for requests that make no sense
// (a quantized format as compute dtype, fp8 weights on a CPU, ...), naming the flag and value.
DevicePolicy resolve_policy(const DeviceInfo& device, NumFormat checkpoint, const UserRequest& request = {});

// Multi-line text for `g4 info`, `g4 device` and the load log.
std::string describe_policy(const DevicePolicy& policy);
nlohmann::json policy_to_json(const DevicePolicy& policy);

}  // namespace g4
