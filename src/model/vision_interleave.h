// The vision tower's BF16 matrices in the row-interleaved layout (BF16_R16, platform/row_interleave.h)
// that the VDPBF16PS prefill kernel (and AVX2's f32 FMA one) reads with one broadcast per 16 rows:
// on the row-major layout a tower's products run a dot-product tile that loads as many vectors
// as it multiplies. The checkpoint's mapping is never written: each matrix is copied into memory
// the VisionModel owns, interleaved there, and its view repointed. Same values; the kernel sums in
// another order, so results move by f32 rounding only.
#pragma once
#include "model/vision_model.h"
#include "model/weight_interleave.h"
#include "platform/thread_pool.h"

namespace g4 {

// Every BF16 product matrix of the tower and projector (the patch embedding, each layer's seven
// linears, embedding_projection) with whole groups of 16 rows and an even width. Call only where
// the products read BF16_R16 (ops::reads_bf16_interleaved); elsewhere they fall back to the
// reference loops. The report counts them as interleave_weights' does (kernels.bf16 set).
InterleaveReport interleave_vision_weights(VisionModel& v, ThreadPool* pool);

}  // namespace g4
