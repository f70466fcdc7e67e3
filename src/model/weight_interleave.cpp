#include "model/weight_interleave.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ops/matmul/gemm_bf16.h"
#include "ops/matmul/gemm_q8.h"
#include "platform/row_interleave.h"

namespace g4 {

namespace {

// Rows per slice: the matrix's rows, or each expert's rows of an [E, out, in] tensor (a group
// must not straddle two experts, so slice_leading keeps working on the interleaved bytes).
int64_t rows_per_slice(const TensorView& t) { return t.shape.size() >= 2 ? t.shape[t.shape.size() - 2] : 0; }

// Whole groups of 16 rows in every slice, whole blocks (BF16_R16: value pairs) in every row.
bool interleavable(const TensorView& t) {
  if (t.shape.size() < 2 || t.shape.back() % dtype_block_size(interleaved_dtype(t.dtype))) return false;
  return rows_per_slice(t) % kInterleaveRows == 0;
}

}  // namespace

bool interleaved_for(DType t, InterleaveFor k) {
  if (t == DType::BF16) return k.bf16;
  // Only where this CPU's int8 tier reads the interleaved layout (NEON reads row-major blocks only).
  return k.int8 && (t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K) &&
         ops::int8_kernel_reads(interleaved_dtype(t));
}

InterleaveReport interleave_weights(Model& m, ThreadPool* pool, InterleaveFor kernels) {
  const auto t0 = std::chrono::steady_clock::now();
  InterleaveReport r;
  r.kernels = kernels;
  ModelWeights& w = m.weights;
  for (const TensorView** slot : streamed_matrices(w)) {
    const TensorView& src = **slot;
    if (!interleaved_for(src.dtype, kernels) || !interleavable(src)) continue;
    if (!m.owns(src.data)) {
      ++r.left_mapped;
      continue;
    }
    const int64_t in = src.shape.back();
    const uint64_t group_bytes = uint64_t(kInterleaveRows) * row_bytes(src.dtype, in);
    const int64_t groups = int64_t(src.nbytes / group_bytes);
    std::byte* data = const_cast<std::byte*>(src.data);  // owned memory (checked above)
    auto work = [&](int64_t b, int64_t e, int) {
      std::vector<std::byte> rows(group_bytes);
      for (int64_t g = b; g < e; ++g) {
        std::byte* p = data + uint64_t(g) * group_bytes;
        std::memcpy(rows.data(), p, group_bytes);
        interleave_group(src.dtype, rows.data(), in, p);
      }
    };
    if (pool) pool->parallel_for(groups, work);
    else work(0, groups, 0);
    ++r.tensors;
    if (src.dtype == DType::BF16) ++r.bf16_tensors;
    r.bytes += src.nbytes;
    TensorView v = src;
    v.dtype = interleaved_dtype(src.dtype);
    m.replace_view(slot, std::move(v));  // a tied embedding follows the head
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string describe_interleave(const InterleaveReport& r) {
  if (!r.tensors && !r.left_mapped) return "";
  // The instructions the interleaved matrices are read by (the request's when none was).
  const bool bf16 = r.tensors ? r.bf16_tensors > 0 : r.kernels.bf16, int8 = r.tensors ? r.bf16_tensors < r.tensors : r.kernels.int8;
  const std::string i8 = ops::int8_kernel_instruction();
  // BF16 matrices are interleaved for VDPBF16PS where the CPU has it, else for the AVX2 FMA kernel.
  const std::string b16 = ops::gemm_bf16_available() ? "VDPBF16PS" : "f32 FMA (AVX2)";
  const std::string units = int8 && bf16 ? i8 + " and " + b16 : bf16 ? b16 : i8;
  char buf[240];
  std::snprintf(buf, sizeof buf, "rows interleaved 16 at a time for %s: %d matrices, %.0f MiB in %.2f s", units.c_str(), r.tensors,
                double(r.bytes) / (1 << 20), r.seconds);
  std::string s = buf;
  if (r.left_mapped) s += "; " + std::to_string(r.left_mapped) + " matrices read from the mapping stay row-major";
  return s;
}

}  // namespace g4
