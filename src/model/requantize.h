// `--weights q8|q4`: re-encode the weight matrices of a loaded model in memory as Q8_0 or Q4_0
// blocks (32 values, f16 scale), so decode reads about half or a quarter of the bf16 bytes.
// Norms, scalars, the router and the per-layer-embedding table (only gathered, one row per
// token) keep their checkpoint dtype. The checkpoint on disk is untouched.
#pragma once
#include <string>

#include "model/model.h"
#include "platform/thread_pool.h"

namespace g4 {

struct RequantizeReport {
  int tensors = 0;
  uint64_t bytes_before = 0, bytes_after = 0;
  double seconds = 0;
};

// `target`: DType::Q8_0 or DType::Q4_0. Matrices whose rows are not whole blocks stay as they are.
RequantizeReport requantize_weights(Model& m, DType target, ThreadPool* pool);

// "q8" -> Q8_0, "q4" -> Q4_0; throws g4::Error naming the flag otherwise.
DType weight_format_from_flag(const std::string& flag);

}  // namespace g4
