// The vision tower from a llama.cpp mmproj GGUF (projector type gemma4v): the converter's tensor
// names (`v.*`, `mm.input_projection.weight`) re-keyed to the Hugging Face names, so
// bind_vision_weights checks a GGUF exactly as it checks safetensors. Spec: gemma4-vision.md §6.2.
//
// The config comes from `clip.*` metadata and the tensors themselves: Hv, Iv, Lv, nh and eps from
// clip.vision.*, d from the q_norm length, nkv from k's rows, P from the position table,
// use_clipped_linears from the clamp tensors' presence, standardize from v.std_bias's, k from
// clip.vision.projector.scale_factor (3 when absent), θ = 100 (hard-coded in llama.cpp too).
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "model/config.h"
#include "model/gguf.h"
#include "model/vision_model.h"

namespace g4 {

// "v.blk.3.attn_q.weight" -> "model.vision_tower.encoder.layers.3.self_attn.q_proj.linear.weight";
// nullopt for names that are not part of a gemma4v mmproj.
std::optional<std::string> mmproj_to_hf_name(const std::string& gguf_name);

// Throws g4::Error naming the key or tensor when the file is not a gemma4v vision projector.
VisionConfig vision_config_from_mmproj(const GgufFile& g);

// A GGUF text model carries no use_bidirectional_attention (llama.cpp makes every image
// bidirectional on all layers instead). The released configs say "vision" exactly for the models
// without per-layer embeddings (26B-A4B, 31B) and null for E2B/E4B; this applies that to a config
// read from GGUF (no-op when the rule is already set or the config is not from GGUF) and records
// a note saying so.
void infer_image_mask_rule_for_gguf(ModelConfig& c);

// `file`: an mmproj GGUF. `text_hidden` is the text decoder's H (the projector's output width is
// checked against it). The patch embedding is rearranged at load from the converter's conv layout
// (Hv, 3, p, p) to the tower's (Hv, p·p·3) and held in memory; every other view stays mapped.
std::unique_ptr<VisionModel> load_vision_mmproj(const std::filesystem::path& file, int64_t text_hidden);

}  // namespace g4
