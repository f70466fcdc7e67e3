// Which integer dot product the int8 kernels run on (gemm_q8.h: int8_kernel_tier and its switch).
#include <atomic>
#include <cstdlib>
#include <string>

#include "ops/matmul/gemm_q8.h"
#include "platform/error.h"

namespace g4::ops {

namespace {

constexpr uint8_t kUnset = 0xFF;
std::atomic<uint8_t> forced_tier{kUnset};

// The host's tier, replaced by G4_INT8_KERNELS when it names one the host runs (any other or unknown
// name is reported once on stderr and ignored: a benchmark must not run a tier it did not ask for
// without saying so).
Int8Dot default_tier() {
  const Int8Dot host = host_cpu().int8_dot();
  const char* env = std::getenv("G4_INT8_KERNELS");
  if (!env || !*env) return host;
  const std::optional<Int8Dot> want = int8_dot_from_name(env);
  if (!want || !host_cpu().runs_int8_tier(*want)) {
    std::fprintf(stderr, "g4: G4_INT8_KERNELS=%s ignored: this CPU's int8 kernels run on %s (accepted: none, avx2, "
                 "avx-vnni, avx512-vnni, neon-dotprod: those this CPU confirmed)\n", env, std::string(int8_dot_name(host)).c_str());
    return host;
  }
  return *want;
}

}  // namespace

Int8Dot int8_kernel_tier() {
  static const Int8Dot by_default = default_tier();
  const uint8_t f = forced_tier.load(std::memory_order_relaxed);
  return f == kUnset ? by_default : Int8Dot(f);
}

void force_int8_kernel_tier(std::optional<Int8Dot> tier) {
  if (tier && !host_cpu().runs_int8_tier(*tier))
    throw Error("force_int8_kernel_tier: " + std::string(int8_dot_name(*tier)) + " asked for, but this CPU did not confirm it (its best: " +
                std::string(int8_dot_name(host_cpu().int8_dot())) + ")");
  forced_tier.store(tier ? uint8_t(*tier) : kUnset, std::memory_order_relaxed);
}

bool int8_kernel_reads(DType dtype) {
  const Int8Dot tier = int8_kernel_tier();
  if (tier == Int8Dot::None) return false;
  if (tier == Int8Dot::NeonDot)  // gemm_q8_neon.h: row-major blocks only
    return dtype == DType::Q8_0 || dtype == DType::Q4_0 || dtype == DType::Q4_K || dtype == DType::Q5_K ||
           dtype == DType::Q6_K;
  switch (dtype) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q8_0_R16:
    case DType::Q4_0_R16:
    case DType::Q4_K_R16:
    case DType::Q5_K_R16:
    case DType::Q6_K_R16:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

const char* int8_kernel_instruction() {
  switch (int8_kernel_tier()) {
    case Int8Dot::Avx512Vnni: return "VPDPBUSD";
    case Int8Dot::AvxVnni: return "VPDPBUSD (AVX-VNNI)";
    case Int8Dot::Avx2: return "VPMADDUBSW+VPMADDWD";
    case Int8Dot::NeonDot: return "SDOT";
    case Int8Dot::None: break;
  }
  return "none";
}

bool gemm_q8_available() { return int8_kernel_tier() != Int8Dot::None; }
bool gemm_q8_avx512() { return int8_kernel_tier() == Int8Dot::Avx512Vnni; }

}  // namespace g4::ops
