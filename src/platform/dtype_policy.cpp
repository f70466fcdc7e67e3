#include "platform/dtype_policy.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>

#include "platform/error.h"
#include "platform/isa_arm.h"

namespace g4 {

std::string_view num_format_name(NumFormat f) {
  switch (f) {
    case NumFormat::F32: return "f32";
    case NumFormat::F16: return "f16";
    case NumFormat::BF16: return "bf16";
    case NumFormat::F8E4M3: return "fp8";
    case NumFormat::Q8: return "q8";
    case NumFormat::Q4: return "q4";
  }
  return "?";
}

std::optional<NumFormat> num_format_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "f32" || lower == "fp32" || lower == "float32") return NumFormat::F32;
  if (lower == "f16" || lower == "fp16" || lower == "float16") return NumFormat::F16;
  if (lower == "bf16" || lower == "bfloat16") return NumFormat::BF16;
  if (lower == "fp8" || lower == "f8" || lower == "f8e4m3" || lower == "f8_e4m3") return NumFormat::F8E4M3;
  if (lower == "q8" || lower == "q8_0") return NumFormat::Q8;
  if (lower == "q4" || lower == "q4_0") return NumFormat::Q4;
  return std::nullopt;
}

NumFormat parse_num_format(std::string_view name, std::string_view what) {
  if (auto f = num_format_from_name(name)) return *f;
  throw Error(std::string(what) + ": unknown number format '" + std::string(name) +
              "' (accepted: f32, f16, bf16, fp8, q8, q4)");
}

NumFormat checkpoint_format(DType d) {
  switch (d) {
    case DType::F32: return NumFormat::F32;
    case DType::F16: return NumFormat::F16;
    case DType::BF16: return NumFormat::BF16;
    case DType::Q8_0: return NumFormat::Q8;
    default: return NumFormat::Q4;
  }
}

bool has_native_bf16(const DeviceInfo& d) {
  if (d.kind == DeviceKind::Cuda) return d.gpu.compute_capability() >= 80;
  return d.amx_bf16_usable() || d.avx512_bf16_usable();
}

bool has_native_f16_math(const DeviceInfo& d) {
  if (d.kind == DeviceKind::Cuda) return d.gpu.compute_capability() >= 70;
  return d.isa.avx512_fp16;
}

bool has_native_fp8(const DeviceInfo& d) {
  return d.kind == DeviceKind::Cuda && d.gpu.compute_capability() >= 89;
}

bool has_native_int8_dot(const DeviceInfo& d) {
  if (d.kind == DeviceKind::Cuda) return d.gpu.compute_capability() >= 61;
  return d.int8_dot() != Int8Dot::None;
}

namespace {

std::string name(NumFormat f) { return std::string(num_format_name(f)); }

// The figure every emulation warning quotes: the measured cost that motivated this policy.
constexpr const char* kEmulationCost =
    "expect decode up to ~2x slower than f16/f32 storage of the same bytes; the report g4 answers "
    "measured up to 87% decode loss";

std::string device_label(const DeviceInfo& d) {
  if (d.kind == DeviceKind::Cuda)
    return "sm_" + std::to_string(d.gpu.compute_capability()) + " (" + d.name + ")";
  return "this CPU";
}

bool is_arm(const DeviceInfo& d) { return d.kind == DeviceKind::Cpu && d.arch == CpuArch::Aarch64; }

// The unit g4's kernels convert f16<->f32 with in one instruction: F16C on x86, NEON's FCVTL/FCVTN
// on aarch64 (Highway's PromoteTo/DemoteTo); f16_in_hardware says whether this CPU has it.
std::string f16_unit(const DeviceInfo& d) { return is_arm(d) ? "NEON's FCVTL/FCVTN" : "F16C"; }
bool f16_in_hardware(const DeviceInfo& d) { return is_arm(d) ? d.isa.neon : d.isa.f16c; }

// Why a CPU without native bf16 compute lacks it: the x86 units missing, or on aarch64 the kernel
// g4 does not have yet (whether or not the CPU offers BF16), as "this CPU <phrase>".
std::string cpu_no_bf16(const DeviceInfo& d) {
  if (!is_arm(d)) return "has no AVX512_BF16 or usable AMX-BF16";
  return d.isa.arm_bf16 ? "offers BFDOT/BFMMLA (bf16), but g4 has no bf16 kernel for aarch64 yet"
                        : "has no BF16 extension (BFDOT/BFMMLA), and g4 no bf16 kernel for aarch64";
}

// Which unit gives a CPU its native bf16, for reasons.
std::string cpu_bf16_unit(const DeviceInfo& d) {
  if (d.amx_bf16_usable()) return "AMX-BF16 (self-test passed)";
  if (d.avx512_bf16_usable()) return "AVX512_BF16 (self-test passed)";
  return "";
}

// Why a CPU that looks bf16-capable is not, or why AMX is skipped: said in `g4 info` (item 7).
std::string amx_fallback_note(const DeviceInfo& d) {
  if (!(d.isa.amx_tile && d.isa.amx_bf16) || d.amx_bf16_usable()) return "";
  if (!d.os_amx_permitted) return "AMX-BF16 reported but the OS did not grant tile state";
  return "AMX-BF16 reported but its self-test " + std::string(selftest_outcome_name(d.amx_bf16_selftest.outcome)) +
         (d.amx_bf16_selftest.detail.empty() ? "" : " (" + d.amx_bf16_selftest.detail + ")");
}

void validate(const DeviceInfo& d, const UserRequest& r) {
  if (r.compute && *r.compute != NumFormat::F32 && *r.compute != NumFormat::F16 && *r.compute != NumFormat::BF16)
    throw Error("--compute " + name(*r.compute) + ": not a compute format (choose f32, f16 or bf16)");
  if (r.kv && (*r.kv == NumFormat::Q8 || *r.kv == NumFormat::Q4))
    throw Error("--kv " + name(*r.kv) + ": the KV cache holds f32, f16, bf16 or fp8");
  if (r.weights && *r.weights == NumFormat::F8E4M3 && d.kind == DeviceKind::Cpu)
    throw Error("--weights fp8: no CPU kernel reads fp8 weights (choose f32, f16, bf16, q8 or q4)");
}

void resolve_compute(const DeviceInfo& d, NumFormat checkpoint, const UserRequest& r, DevicePolicy& p) {
  const bool gpu = d.kind == DeviceKind::Cuda;
  const bool bf16_native = has_native_bf16(d);
  const bool f16_native = has_native_f16_math(d);
  if (r.compute) {
    p.compute = *r.compute;
    if (p.compute == NumFormat::BF16 && !bf16_native) {
      p.compute_reason = "compute bf16: forced by request; " + device_label(d) +
                         (is_arm(d) ? " " + cpu_no_bf16(d) : std::string(" has no bf16 datapath"));
      p.warnings.push_back(std::string("bf16 is emulated through f32 conversion on ") + device_label(d) +
                           (gpu ? "" : is_arm(d) ? " (it " + cpu_no_bf16(d) + ")" : " (no AVX512_BF16 or usable AMX-BF16)") +
                           ": " + kEmulationCost);
    } else if (p.compute == NumFormat::F16 && !f16_native) {
      p.compute_reason = "compute f16: forced by request; " + device_label(d) +
                         (is_arm(d) && d.isa.fp16 ? " offers FP16 arithmetic, but g4 has no f16 kernel for it"
                                                  : " has no f16 arithmetic");
      p.warnings.push_back("f16 arithmetic is emulated through f32 on " + device_label(d) +
                           (gpu ? "" : !is_arm(d) ? " (no AVX512_FP16)"
                                       : d.isa.fp16 ? " (it offers FP16 arithmetic, but g4 has no f16 kernel for aarch64 yet)"
                                                    : " (no FP16 arithmetic)") +
                           ": every operation widens and rounds back, so it is slower than f32 compute and "
                           "less accurate; f16 storage with f32 compute gives the same bytes at full speed");
    } else {
      p.compute_reason = "compute " + name(p.compute) + ": forced by request; native on " + device_label(d);
    }
    return;
  }
  if (checkpoint == NumFormat::F32) {
    p.compute = NumFormat::F32;
    p.compute_reason = "compute f32: the checkpoint is f32 and f32 math keeps it exact";
    if (bf16_native) p.compute_reason += " (--compute bf16 runs natively here and is faster)";
    return;
  }
  if (checkpoint == NumFormat::F16) {
    if (gpu && f16_native) {
      p.compute = NumFormat::F16;
      p.compute_reason = "compute f16: f16 checkpoint and " + device_label(d) + " runs f16 on tensor cores";
    } else {
      p.compute = NumFormat::F32;
      p.compute_reason = "compute f32: f16 checkpoint widened to f32 (bf16 would drop f16's mantissa bits)";
    }
    return;
  }
  // bf16, fp8 and quantized checkpoints: bf16 math where the device has a bf16 datapath.
  if (bf16_native) {
    p.compute = NumFormat::BF16;
    p.compute_reason = gpu ? "compute bf16: " + device_label(d) + " (compute capability >= 8.0) has a bf16 datapath"
                           : "compute bf16: " + cpu_bf16_unit(d) + " executes bf16 dot products natively";
  } else if (gpu && f16_native) {
    p.compute = NumFormat::F16;
    p.compute_reason = "compute f16: " + device_label(d) +
                       " has no bf16 datapath (needs compute capability 8.0) but runs f16 natively on tensor cores";
  } else {
    p.compute = NumFormat::F32;
    p.compute_reason = "compute f32: " + device_label(d) +
                       (gpu ? " has no bf16 or f16 datapath" : " " + cpu_no_bf16(d)) +
                       "; bf16 math would be emulated through f32";
  }
}

void resolve_weights(const DeviceInfo& d, NumFormat checkpoint, const UserRequest& r, DevicePolicy& p) {
  const bool gpu = d.kind == DeviceKind::Cuda;
  if (r.weights) {
    p.weights = *r.weights;
    if (p.weights == checkpoint) {
      p.weights_reason = "weights " + name(p.weights) + ": requested, same as the checkpoint";
    } else if (checkpoint == NumFormat::Q8 || checkpoint == NumFormat::Q4) {
      p.weights_reason = "weights " + name(p.weights) + ": requested; the " + name(checkpoint) +
                         " checkpoint is dequantized at load (more memory, no accuracy gained)";
    } else {
      p.weights_reason = "weights " + name(p.weights) + ": requested; converted from the " + name(checkpoint) +
                         " checkpoint at load";
    }
    if (p.weights == NumFormat::F16 && (checkpoint == NumFormat::BF16 || checkpoint == NumFormat::F32))
      p.warnings.push_back("weights converted " + name(checkpoint) +
                           " -> f16: f16's range ends at 65504, so the loader must refuse weights beyond it");
    if (p.weights == NumFormat::F8E4M3 && !has_native_fp8(d))
      p.warnings.push_back("fp8 weights are emulated on " + device_label(d) +
                           " (fp8 needs compute capability 8.9): each weight is widened in software; " +
                           kEmulationCost);
    return;
  }
  p.weights = checkpoint;
  switch (checkpoint) {
    case NumFormat::F32:
      p.weights_reason = "weights f32: kept as in the checkpoint (--weights bf16/f16/q8 reads fewer bytes per token)";
      break;
    case NumFormat::BF16:
      if (gpu && p.compute == NumFormat::F16) {
        p.weights = NumFormat::F16;
        p.weights_reason = "weights f16: converted from bf16 at load because " + device_label(d) +
                           " has no bf16 datapath (the loader must check |w| <= 65504)";
      } else if (has_native_bf16(d)) {
        p.weights_reason = "weights bf16: kept as in the checkpoint; read natively";
      } else {
        p.weights_reason = "weights bf16: kept as in the checkpoint; widening bf16 to f32 is a 16-bit shift, so "
                           "storage costs nothing and reads half the bytes of f32";
      }
      break;
    case NumFormat::F16:
      if (!gpu && !f16_in_hardware(d)) {
        p.weights = NumFormat::F32;
        p.weights_reason = "weights f32: converted from f16 at load; without " + f16_unit(d) +
                           " every read would widen in software";
      } else {
        p.weights_reason = gpu ? "weights f16: kept as in the checkpoint"
                               : "weights f16: kept as in the checkpoint; " + f16_unit(d) +
                                     " widens to f32 in one instruction";
      }
      break;
    case NumFormat::F8E4M3:
      if (!gpu) throw Error("checkpoint fp8: no CPU kernel reads fp8 weights; request --weights bf16 or f32");
      p.weights_reason = has_native_fp8(d) ? "weights fp8: kept as in the checkpoint; native on " + device_label(d)
                                           : "weights fp8: kept as in the checkpoint";
      if (!has_native_fp8(d))
        p.warnings.push_back("fp8 weights are emulated on " + device_label(d) +
                             " (fp8 needs compute capability 8.9); " + kEmulationCost);
      break;
    case NumFormat::Q8:
    case NumFormat::Q4:
      p.weights_reason = "weights " + name(checkpoint) + ": kept as in the checkpoint (dequantized per tile)";
      break;
  }
}

void resolve_kv(const DeviceInfo& d, const UserRequest& r, DevicePolicy& p) {
  const bool gpu = d.kind == DeviceKind::Cuda;
  if (r.kv) {
    p.kv = *r.kv;
    p.kv_reason = "kv " + name(p.kv) + ": forced by request";
    if (p.kv == NumFormat::F8E4M3 && !has_native_fp8(d))
      p.warnings.push_back("fp8 KV cache is emulated on " + device_label(d) +
                           " (no fp8 datapath; needs compute capability 8.9): every key and value is decoded in "
                           "software; expect attention slower than with an f16 cache, and lower precision");
    else if (p.kv == NumFormat::F16 && !gpu && !f16_in_hardware(d))
      p.warnings.push_back("f16 KV cache without " + f16_unit(d) +
                           ": every key and value is converted in software; expect attention slower than with an "
                           "f32 cache");
    else if (p.kv == NumFormat::BF16 && !has_native_bf16(d))
      p.kv_reason += "; no bf16 datapath, so attention widens it to f32 (a 16-bit shift; same bytes as f16)";
    return;
  }
  if (has_native_bf16(d) && p.compute == NumFormat::BF16) {
    p.kv = NumFormat::BF16;
    p.kv_reason = "kv bf16: half the bytes of f32 and read natively by the bf16 kernels";
  } else if (gpu || f16_in_hardware(d)) {
    p.kv = NumFormat::F16;
    p.kv_reason = gpu ? "kv f16: half the bytes of f32; native on " + device_label(d)
                      : "kv f16: half the bytes of f32; " + f16_unit(d) + " converts f16<->f32 in one instruction";
  } else {
    p.kv = NumFormat::F32;
    p.kv_reason = "kv f32: no " + f16_unit(d) + ", so a half-size cache would be converted in software";
  }
}

// aarch64: Highway's NEON target with f32 math. The optional units g4 has no kernel for are named,
// never claimed.
void resolve_arm_kernel(const DeviceInfo& d, DevicePolicy& p) {
  p.kernel_family = d.isa.neon ? "neon" : "scalar";
  p.kernel_reason = d.isa.neon ? "kernels neon: Highway's NEON target with f32 math (FMLA)"
                               : "kernels scalar: no Advanced SIMD (asimd) reported";
  const std::string idle = arm_units_without_kernel(d.isa);
  if (!idle.empty()) p.kernel_reason += "; this CPU also offers " + idle + ", but g4 has no aarch64 kernel for them yet";
  if (d.isa.sve)
    p.kernel_reason += " (Highway's SVE targets are not compiled: the kernels keep arrays of vectors, which SVE's "
                       "sizeless types cannot form)";
  if (p.compute == NumFormat::BF16) p.kernel_reason += " (bf16 operands widened to f32)";
}

void resolve_kernel(const DeviceInfo& d, DevicePolicy& p) {
  if (d.kind == DeviceKind::Cuda) {
    const bool tc_bf16 = p.compute == NumFormat::BF16 && has_native_bf16(d);
    const bool tc_f16 = p.compute == NumFormat::F16 && has_native_f16_math(d);
    p.kernel_family = tc_bf16 ? "cuda-tc-bf16" : tc_f16 ? "cuda-tc-f16" : "cuda-f32";
    p.kernel_reason = "kernels " + p.kernel_family + ": " + name(p.compute) + " compute on " + device_label(d);
    if (p.compute != NumFormat::F32 && !tc_bf16 && !tc_f16)
      p.kernel_reason += " (" + name(p.compute) + " operands widened to f32)";
    return;
  }
  if (is_arm(d)) return resolve_arm_kernel(d, p);
  std::string fallback = amx_fallback_note(d);
  if (p.compute == NumFormat::BF16 && d.amx_bf16_usable()) {
    p.kernel_family = "amx-bf16";
    p.kernel_reason = "kernels amx-bf16: cpuid, OS tile permission and the tile self-test all confirmed AMX-BF16";
    return;
  }
  if (p.compute == NumFormat::BF16 && d.avx512_bf16_usable()) {
    p.kernel_family = "avx512-bf16";
    p.kernel_reason = "kernels avx512-bf16: AVX512_BF16 confirmed by self-test";
  } else if (d.isa.avx512f && d.isa.avx512bw && d.isa.avx512vl) {
    p.kernel_family = "avx512";
    p.kernel_reason = "kernels avx512: AVX-512 F/BW/VL with f32 math";
  } else if (d.isa.avx2 && d.isa.fma) {
    p.kernel_family = "avx2-fma";
    p.kernel_reason = "kernels avx2-fma: AVX2 + FMA with f32 math";
  } else {
    p.kernel_family = "scalar";
    p.kernel_reason = "kernels scalar: neither AVX-512 nor AVX2+FMA is usable";
  }
  if (p.compute == NumFormat::BF16 && !has_native_bf16(d)) p.kernel_reason += " (bf16 operands widened to f32)";
  if (p.compute == NumFormat::BF16 && !fallback.empty())
    p.kernel_reason += "; " + fallback + ", so g4 falls back to " + p.kernel_family;
}

// aarch64: SDOT takes Q8_0, Q4_0 and the K-quants' blocks (ops/matmul/gemm_q8_neon.h); SMMLA has
// no aarch64 kernel yet, and the reason says so rather than claim one.
void resolve_arm_activations(const DeviceInfo& d, const UserRequest& r, DevicePolicy& p) {
  const std::string units = arm_int8_units(d.isa), w = name(p.weights);
  if (d.int8_dot() == Int8Dot::NeonDot && !(r.compute && *r.compute == NumFormat::F32)) {
    p.activations = NumFormat::Q8;
    p.activations_reason = "activations q8: " + w + " weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K blocks) multiply "
                           "activations quantized to int8 per 32 values on " +
                           std::string(int8_dot_instruction(Int8Dot::NeonDot)) +
                           " (self-test passed): exact int32 block sums, plus at most half a step (absmax/254) of "
                           "rounding per activation; Q4_1 has no aarch64 int8 kernel and is widened to f32 in "
                           "registers" +
                           (d.isa.i8mm ? std::string("; SMMLA (i8mm) is present but has no g4 kernel yet") : "") +
                           "; --compute f32 keeps them f32";
    return;
  }
  p.activations = NumFormat::F32;
  if (d.int8_dot() == Int8Dot::NeonDot) {  // only --compute f32 gets here
    p.activations_reason = "activations f32: --compute f32 keeps activations unquantized (" + w +
                           " blocks widened to f32 in registers; slower than int8 products on SDOT)";
    return;
  }
  const std::string why = d.isa.neon_dotprod ? "the SDOT (dotprod) self-test did not pass"
                                             : "this CPU has no SDOT (dotprod)";
  p.activations_reason = "activations f32: " + why + ", which g4's aarch64 int8 kernels need" +
                         (units.empty() ? std::string() : " (present: " + units + ")") + ", so " + w +
                         " blocks are widened to f32 in registers (f32 block dots): expect " + w +
                         " decode several times below the memory roofline";
}

// Quantized weights on a CPU with int8 dot products multiply int8-quantized activations (the
// llama.cpp scheme for q8_0/q4_0): the block sums are exact integers, and decode stays
// memory-bound instead of spending its time widening bytes to f32.
void resolve_activations(const DeviceInfo& d, const UserRequest& r, DevicePolicy& p) {
  const bool quantized = p.weights == NumFormat::Q8 || p.weights == NumFormat::Q4;
  p.activations = p.compute;
  if (!quantized) {
    p.activations_reason = "activations " + name(p.compute) + ": as compute (weights are not block-quantized)";
    return;
  }
  if (d.kind == DeviceKind::Cuda) {
    p.activations_reason = "activations " + name(p.compute) + ": " + name(p.weights) + " weights are widened to " +
                           name(p.compute) + " per tile";
    return;
  }
  if (is_arm(d)) return resolve_arm_activations(d, r, p);
  if (r.compute && *r.compute == NumFormat::F32) {
    p.activations = NumFormat::F32;
    p.activations_reason = "activations f32: --compute f32 keeps activations unquantized (" + name(p.weights) +
                           " blocks widened to f32 in registers; slower than int8 products)";
    return;
  }
  if (has_native_int8_dot(d)) {
    const Int8Dot tier = d.int8_dot();
    p.activations = NumFormat::Q8;
    p.activations_reason = "activations q8: " + name(p.weights) +
                           " weights multiply activations quantized to int8 per 32 values on " +
                           std::string(int8_dot_instruction(tier)) +
                           (tier == Int8Dot::Avx2 ? " (this CPU's best integer dot product: no VNNI)"
                                                  : " (self-test passed)") +
                           ": exact int32 block sums, plus at most half a step (absmax/254) "
                           "of rounding per activation; --compute f32 keeps them f32";
    if (d.amx_int8_usable())
      p.activations_reason += "; prefill on AMX-INT8 tiles (self-test passed; used once the tile kernel's own "
                              "check passes on this CPU), bit-identical to VPDPBUSD";
    return;
  }
  p.activations = NumFormat::F32;
  p.activations_reason = "activations f32: no integer dot product (AVX2, AVX-VNNI or AVX512_VNNI) for int8 "
                         "products, so " + name(p.weights) + " blocks are widened to f32 in registers";
}

}  // namespace

DevicePolicy resolve_policy(const DeviceInfo& device, NumFormat checkpoint, const UserRequest& request) {
  validate(device, request);
  DevicePolicy policy;
  resolve_compute(device, checkpoint, request, policy);
  resolve_weights(device, checkpoint, request, policy);
  resolve_kv(device, request, policy);
  resolve_kernel(device, policy);
  resolve_activations(device, request, policy);
  return policy;
}

std::string describe_policy(const DevicePolicy& p) {
  std::ostringstream out;
  out << "policy: compute " << num_format_name(p.compute) << ", weights " << num_format_name(p.weights) << ", kv "
      << num_format_name(p.kv) << ", kernels " << p.kernel_family << ", activations "
      << num_format_name(p.activations) << "\n";
  for (const auto& reason : p.reasons()) out << "  " << reason << "\n";
  for (const auto& warning : p.warnings) out << "  warning: " << warning << "\n";
  return out.str();
}

nlohmann::json policy_to_json(const DevicePolicy& p) {
  return nlohmann::json{{"compute", std::string(num_format_name(p.compute))},
                        {"weights", std::string(num_format_name(p.weights))},
                        {"kv", std::string(num_format_name(p.kv))},
                        {"kernel_family", p.kernel_family},
                        {"activations", std::string(num_format_name(p.activations))},
                        {"reasons",
                         {{"compute", p.compute_reason},
                          {"weights", p.weights_reason},
                          {"kv", p.kv_reason},
                          {"kernels", p.kernel_reason},
                          {"activations", p.activations_reason}}},
                        {"warnings", p.warnings}};
}

}  // namespace g4
