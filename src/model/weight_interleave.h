// Re-orders Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K weight matrices in place into the row-interleaved layouts of
// platform/row_interleave.h (Q8_0_R16, Q4_0_R16, Q4_K_R16, Q5_K_R16, Q6_K_R16) for the VNNI int8 kernels, and
// BF16 ones into BF16_R16 for the VDPBF16PS kernel (or, on AVX2 CPUs without it, the f32 FMA kernel
// of ops/matmul/gemm_bf16_256.h): same bytes, same values, 16 rows per instruction. Only matrices in memory g4 owns are touched (re-encoded by
// --weights q8|q4, or copied into huge pages); mapped checkpoint bytes are never written, and
// those matrices keep the row-major kernel. A tied embedding stays tied: its gathers read a row
// out of its group (TensorView::row_to_f32).
#pragma once
#include <cstdint>
#include <string>

#include "model/model.h"
#include "platform/thread_pool.h"

namespace g4 {

// Which kernels the products will run on, so which matrices to interleave: int8 (matmul's
// ops::uses_int8_kernel): Q8_0/Q4_0/Q4_K/Q5_K/Q6_K; bf16 (ops::reads_bf16_interleaved): BF16. On any
// other path interleaved matrices fall back to the reference loops, so call with what the
// products really take.
struct InterleaveFor {
  bool int8 = false;
  bool bf16 = false;
};

struct InterleaveReport {
  int tensors = 0;       // matrices interleaved
  int bf16_tensors = 0;  // of those, BF16 ones (for VDPBF16PS or AVX2 FMA; the rest for VPDPBUSD)
  uint64_t bytes = 0;    // their bytes
  int left_mapped = 0;   // matrices of those dtypes left row-major because they are read from the mapping
  InterleaveFor kernels;  // the request (for the report's wording)
  double seconds = 0;
};

// Whether matrices of dtype t are interleaved for those kernels (given whole groups and blocks).
bool interleaved_for(DType t, InterleaveFor kernels);

InterleaveReport interleave_weights(Model& m, ThreadPool* pool, InterleaveFor kernels);

// One line for logs: "rows interleaved 16 at a time for VPDPBUSD: 277 matrices, 2310 MiB in
// 2.02 s" (VDPBF16PS for bf16, "f32 FMA (AVX2)" where no AVX512_BF16 reads them); empty when
// nothing was interleaved or left row-major.
std::string describe_interleave(const InterleaveReport& r);

}  // namespace g4
