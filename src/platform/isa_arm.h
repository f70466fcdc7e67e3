// The aarch64 half of the device probe (platform/device.h): the units the Linux kernel reports in
// AT_HWCAP / AT_HWCAP2, and the words the device report and the dtype policy use for them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "platform/device.h"

namespace g4 {

// On aarch64: sets device.arch, the name ("aarch64 CPU", with the implementer and part from
// /proc/cpuinfo where it has them), the vendor and the ARM fields of device.isa from getauxval,
// and runs the SDOT self-test where dotprod is listed (the int8 kernels' NEON tier executes it;
// no g4 kernel executes i8mm, bf16 or sve yet, so they get none). Elsewhere it does nothing.
void probe_arm_isa(DeviceInfo& device, const ProbeOptions& options);

// SDOT on fixed operands against the scalar path (aarch64 builds; NotRun elsewhere).
SelfTest check_neon_dotprod();

// The ARM features in report order: neon, neon_dotprod, i8mm, arm_bf16, sve, sve2, fp16.
std::vector<std::pair<const char*, bool>> arm_feature_list(const IsaFeatures& f);

// The int8 dot-product units present, by instruction and feature name: "SDOT/UDOT (dotprod) and
// SMMLA (i8mm)", "SDOT/UDOT (dotprod)"; "" when neither.
std::string arm_int8_units(const IsaFeatures& f);

// Every optional unit present that g4 has no kernel for: "SMMLA (i8mm)", "BFDOT/BFMMLA (bf16)",
// "SVE", "SVE2", "FP16 arithmetic (fphp)", joined by ", "; "" when none (SDOT has the int8 kernels).
std::string arm_units_without_kernel(const IsaFeatures& f);

}  // namespace g4
