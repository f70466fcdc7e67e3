// The Gemma 4 text decoder (dense, per-layer embeddings, KV sharing, mixture of experts) on a
// Vulkan device: weights uploaded once into device-local buffers (f32; matrices as stored:
// f16/bf16 words, or Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K blocks, widened or dequantized in the shaders; a matrix
// over the device's maxStorageBufferRange split by whole rows into several), per-layer KV buffers
// indexed by absolute position (a ring on sliding layers), and one command buffer per step with
// every layer's dispatches recorded behind barriers: one submission per step, not one per op.
// The shaders are src/gpu/shaders/*.comp; docs/gpu.md has the plan and the bounds measured.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gpu/gpu_decoder_spec.h"
#include "gpu/vulkan/vk_session.h"

namespace g4::gpu {

struct GpuDecoderLimits {
  uint32_t max_context = 0;  // positions one sequence may reach (rows of the full layers' KV buffers)
  uint32_t max_step = 0;     // tokens one step may carry (rows of the activation buffers)
  // Bytes one weight buffer may hold: 0 takes the device's maxStorageBufferRange (and
  // maxMemoryAllocationSize); a smaller value splits matrices into more parts (tests do).
  uint64_t max_buffer_bytes = 0;
  uint32_t slots = 1;        // sequences whose K/V the device holds at once (each layer's buffer is [slots, capacity])
  // K/V stored as f16 (half the device memory; each value rounded once as it is stored, and the
  // K/V a batch downloads are those f16 values widened). Needs storageBuffer16BitAccess.
  bool kv_f16 = false;
  // The weight products (matmul, gemv, the experts' mat-vec) multiply in f16 and sum in f32
  // (src/gpu/shaders/product.glsl; the policy's compute f16, `--compute f16`); norms, softmax,
  // attention and RoPE stay f32. Needs shaderFloat16 and storageBuffer16BitAccess.
  bool compute_f16 = false;
};

// One row of a batch: a token of the sequence held in `slot`, at absolute position `pos`. Rows
// of one slot are consecutive positions in one contiguous run; each slot appears once per batch.
struct GpuRow {
  uint32_t slot = 0;
  int64_t pos = 0;
  int token = 0;
  bool want_logits = false;
};

struct GpuBatchOptions {
  bool hidden = false;  // download the final-normed hidden rows of the rows that want logits
  bool kv = false;      // download every row's keys and values (what a host mirror of the cache needs)
};

struct GpuBatchResult {
  std::vector<float> logits;  // [n_wanted, V] in row order
  std::vector<float> hidden;  // [n_wanted, H] with GpuBatchOptions::hidden
  // With GpuBatchOptions::kv, per layer (empty on KV-shared layers): [T, kvh·hd] in row order.
  std::vector<std::vector<float>> k, v;
  std::optional<double> device_seconds;  // all of the batch's dispatches, by timestamps
  uint32_t dispatches = 0;               // recorded into the batch's one command buffer
  uint32_t submissions = 0;              // 1
};

struct GpuStepResult {
  std::vector<float> logits;             // [T, V], row i = logits after token i
  std::optional<double> device_seconds;  // all of the step's dispatches, by timestamps
  uint32_t dispatches = 0;               // recorded into the step's one command buffer
  uint32_t submissions = 0;              // 1
};

class GpuDecoder {
 public:
  // Uploads every weight the spec names; a matrix, table or expert tensor over the buffer limit
  // goes into several buffers of whole rows (whole experts). Throws g4::Error naming the tensor:
  // a dtype the shaders do not read (the CPU's row-interleaved ones), f16 words without 16-bit storage,
  // or one row (a vector) over the buffer limit (with both sizes); before uploading anything,
  // weights that together exceed the largest device-local heap (bytes needed and available);
  // also a tile or reduction the device's shared memory cannot hold (the planner's arithmetic).
  GpuDecoder(const VulkanSession& session, GpuDecoderSpec spec, GpuDecoderLimits limits);
  ~GpuDecoder();
  GpuDecoder(const GpuDecoder&) = delete;
  GpuDecoder& operator=(const GpuDecoder&) = delete;

  // Runs `tokens` at positions position() .. position() + T - 1 of the sequence, appending their
  // keys and values to the KV buffers. Throws g4::Error for an empty step, one over max_step,
  // positions past max_context, or an id outside the vocabulary (nothing is run then).
  // (Slot 0 only, every row's logits: the one-sequence form the tests of the shaders use.)
  GpuStepResult step(const std::vector<int>& tokens);
  int64_t position() const;
  void reset();  // a new sequence from position 0

  // Runs rows of any slots in one command buffer and one submission: each row's key and value
  // are written to its slot at its position, and each row attends over its own slot's keys.
  // Throws g4::Error before recording anything for an empty batch, one over max_step, a slot
  // out of range, positions past max_context, runs that are not consecutive, or an id outside
  // the vocabulary.
  GpuBatchResult run(const std::vector<GpuRow>& rows, GpuBatchOptions options = {});
  // Uploads positions [begin, begin + n) of a layer that owns KV into `slot` (k, v: [n, kvh·hd]);
  // a sliding layer keeps the last capacity positions, as its ring would. For a host cache that
  // hands a sequence to the device (a fork, a restored prefix, a slot given to another sequence).
  void load_kv(uint32_t slot, int layer, int64_t begin, int64_t n, const float* k, const float* v);
  uint32_t capacity(int layer) const;  // positions a layer's buffer holds per slot (0: KV-shared)
  uint64_t weight_bytes() const;  // device bytes of the resident weights
  uint32_t weight_buffers() const;  // device buffers holding them (more than tensors when split)

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace g4::gpu
