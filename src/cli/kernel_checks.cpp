#include "cli/kernel_checks.h"

#include "ops/amx/attention_bf16_tiles.h"
#include "ops/amx/gemm_q8_tiles.h"

namespace g4::cli {
namespace {

nlohmann::json kernel_check_json(const ops::TileKernelCheck& c) {
  return {{"run", c.run}, {"passed", c.passed}, {"detail", c.detail}};
}

}  // namespace

const char* kernel_check_status(const ops::TileKernelCheck& c) { return !c.run ? "not run" : c.passed ? "passed" : "failed"; }

void add_kernel_checks_json(nlohmann::json& out) {
  out["amx_bf16_kernel_check"] = kernel_check_json(ops::amx_bf16_kernel_check());
  out["amx_int8_kernel_check"] = kernel_check_json(ops::amx_int8_kernel_check());
  out["amx_attention_kernel_check"] = kernel_check_json(ops::amx_attention_kernel_check());
}

}  // namespace g4::cli
