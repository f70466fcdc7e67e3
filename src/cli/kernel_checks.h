// The one-time checks of the AMX tile kernels (ops/amx), worded alike by g4 device, info and bench.
#pragma once
#include <nlohmann/json.hpp>

#include "ops/amx/gemm_bf16_tiles.h"

namespace g4::cli {

// "not run", "passed" or "failed".
const char* kernel_check_status(const ops::TileKernelCheck& c);

// Sets amx_bf16_kernel_check, amx_int8_kernel_check and amx_attention_kernel_check in `out`,
// each {run, passed, detail}.
void add_kernel_checks_json(nlohmann::json& out);

}  // namespace g4::cli
