// ModelWeights: the Gemma 4 text decoder's tensors, bound by name from a checkpoint and
// validated against the config (presence, dtype, exact shape) before anything runs.
// Views point into the checkpoint's mmaps; nothing is copied or upcast.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "platform/bandwidth.h"
#include "platform/tensor_view.h"

namespace g4 {

struct LayerWeights {
  // Sandwich norms, [H] each.
  const TensorView* input_norm = nullptr;
  const TensorView* post_attention_norm = nullptr;
  const TensorView* pre_feedforward_norm = nullptr;
  const TensorView* post_feedforward_norm = nullptr;
  // Attention. k_proj/k_norm null on KV-shared layers; v_proj null there and on K=V layers.
  const TensorView* q_proj = nullptr;  // [nH·hd, H]
  const TensorView* q_norm = nullptr;  // [hd]
  const TensorView* k_proj = nullptr;  // [kvh·hd, H]
  const TensorView* k_norm = nullptr;  // [hd]
  const TensorView* v_proj = nullptr;  // [kvh·hd, H]
  const TensorView* o_proj = nullptr;  // [H, nH·hd]
  // Dense MLP (kept on MoE models too).
  const TensorView* gate_proj = nullptr;  // [I_i, H]
  const TensorView* up_proj = nullptr;    // [I_i, H]
  const TensorView* down_proj = nullptr;  // [H, I_i]
  const TensorView* layer_scalar = nullptr;  // [1]
  // Per-layer embeddings (P > 0).
  const TensorView* ple_input_gate = nullptr;   // [P, H]
  const TensorView* ple_projection = nullptr;   // [H, P]
  const TensorView* ple_post_norm = nullptr;    // [H]
  // MoE.
  const TensorView* router_proj = nullptr;              // [E, H]
  const TensorView* router_scale = nullptr;             // [H]
  const TensorView* router_per_expert_scale = nullptr;  // [E]
  const TensorView* experts_gate_up = nullptr;          // [E, 2·I_e, H]  (gate rows first)
  const TensorView* experts_down = nullptr;             // [E, H, I_e]
  const TensorView* pre_feedforward_norm_2 = nullptr;   // [H]
  const TensorView* post_feedforward_norm_1 = nullptr;  // [H]
  const TensorView* post_feedforward_norm_2 = nullptr;  // [H]
};

struct ModelWeights {
  std::string prefix;                          // e.g. "model.language_model."
  const TensorView* embed_tokens = nullptr;    // [V, H]; also the LM head when tied
  const TensorView* lm_head = nullptr;         // [V, H]; == embed_tokens when tied
  const TensorView* embed_per_layer = nullptr;           // [V_ple, L·P]
  const TensorView* per_layer_model_projection = nullptr;  // [L·P, H]
  const TensorView* per_layer_projection_norm = nullptr;   // [P]
  const TensorView* final_norm = nullptr;      // [H]
  std::vector<LayerWeights> layers;

  uint64_t bound_bytes = 0;                    // bytes of every tensor the forward pass uses
  uint64_t bound_tensors = 0;
  std::map<std::string, uint64_t> bytes_by_dtype;
  uint64_t parameter_count = 0;
  std::vector<std::string> notes;              // ignored tensors, unused copies, ...
  DType dtype = DType::F32;                    // dtype of embed_tokens (the "weight dtype")
};

// `tensors` is every tensor of the checkpoint by name; `source` names it in errors.
// Throws g4::Error naming the file, tensor, expected and found shape/dtype.
ModelWeights bind_weights(const ModelConfig& c, const std::map<std::string, TensorView>& tensors,
                          const std::string& source);

// The slots of every weight matrix the forward pass streams through a matrix product (each row
// read once per token): projections, MLP/expert matrices, the PLE gate/projection, the
// per-layer model projection and the LM head. A tied head appears once, as lm_head (the caller
// keeps embed_tokens in step). Gathered tables (embed_per_layer, an untied embed_tokens) and
// vectors are not listed.
std::vector<const TensorView**> streamed_matrices(ModelWeights& w);

// The weight bytes one decoded token streams through its products, in decode's order: the
// per-layer model projection, each layer's matrices, the head. An MoE layer's expert tensors
// count top_k of their E experts (which ones varies per token, the bytes do not). Norm vectors
// and gathered embedding rows (a tiny share) are left out. For the bench's read-pass roofline.
std::vector<ReadRange> decode_weight_reads(ModelWeights& w, const ModelConfig& c);

}  // namespace g4
