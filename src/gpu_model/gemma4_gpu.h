// The bridge between a loaded Gemma 4 model and the GPU decoder: src/gpu depends on platform only
// and knows no model, and src/model must not depend on src/gpu (docs/design.md), so the one
// place that reads both is this small layer (g4_gpu_model, above model and gpu). It fills the
// decoder's spec from the Model with the model layer's own numbers (embedding scales, RoPE
// angles), so the GPU path and forward_reference share those bits.
#pragma once
#include "gpu/gpu_decoder_spec.h"
#include "model/model.h"

namespace g4 {

// Views into `m` (which must outlive the spec). Throws g4::Error for what the GPU decoder does not
// run: a hidden activation other than gelu_pytorch_tanh.
gpu::GpuDecoderSpec gpu_decoder_spec(const Model& m);

}  // namespace g4
