// make_matmul_context with the policy's two switches named, for the tests: context_for(device,
// {.int8_activations = true}) reads as what it asks for.
#pragma once
#include <cstdint>

#include "ops/matmul/matmul.h"
#include "platform/device.h"

namespace g4::test {

struct PolicyOptions {
  bool bf16_compute = false;      // MatmulContext::bf16_compute
  bool int8_activations = false;  // MatmulContext::int8_activations
};

inline ops::MatmulContext context_for(const DeviceInfo& device, PolicyOptions policy, int64_t widest_in = 1536) {
  return ops::make_matmul_context(nullptr, device, widest_in, policy.bf16_compute, policy.int8_activations);
}

}  // namespace g4::test
