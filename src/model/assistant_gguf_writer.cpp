#include "model/assistant_gguf_writer.h"

#include <cstring>
#include <vector>

#include "model/assistant_gguf.h"

namespace g4 {

GgufExportReport write_assistant_gguf(const AssistantModel& d, DType type, const std::filesystem::path& out) {
  const Model& m = *d.stack;
  const AssistantConfig& c = d.config;
  const std::string p = "gemma4-assistant.";
  GgufExportReport rep;
  GgufWriter w;
  add_gemma4_metadata(w, c.text, out.stem().string(), "gemma4-assistant");
  w.set_u32(p + "attention.shared_kv_layers", uint32_t(c.text.num_hidden_layers));  // as the converter writes it
  w.set_u32(p + "embedding_length_out", uint32_t(c.backbone_hidden_size));
  w.set_u32(p + "nextn_predict_layers", uint32_t(c.text.num_hidden_layers));
  if (c.use_ordered_embeddings) w.set_u32(p + "centroid_intermediate_top_k", uint32_t(c.centroid_intermediate_top_k));
  w.set_u32("general.quantization_version", 2);

  const std::map<std::string, TensorView>& src = m.gguf ? m.gguf_views : m.archive.tensors();
  std::vector<const TensorView*> sources;  // nullptr: rope_freqs or the ordering
  const std::vector<float> rope = gemma4_rope_freqs(c.text);
  w.add_tensor("rope_freqs.weight", DType::F32, {int64_t(rope.size())});
  sources.push_back(nullptr);
  int fallback_q8 = 0, fallback_f32 = 0;
  for (const auto& [name, view] : src) {
    const auto gg = assistant_gguf_name(name);
    if (!gg) {
      rep.notes.push_back("not written (not a drafter weight): " + name);
      continue;
    }
    const DType t = gguf_stored_dtype(view, type, type, fallback_q8, fallback_f32);
    w.add_tensor(*gg, t, view.shape);
    sources.push_back(&view);
    rep.tensors_by_dtype[std::string(dtype_name(t))] += 1;
  }
  rep.tensors_by_dtype["F32"] += 1;  // rope_freqs
  const Int64Tensor* ordering = c.use_ordered_embeddings ? d.token_ordering_tensor() : nullptr;
  if (ordering) {
    w.add_i64_tensor(kGgufTokenOrdering, ordering->shape);
    sources.push_back(nullptr);
    rep.tensors_by_dtype["I64"] += 1;
  }
  finish_export_report(rep, w, type, fallback_q8, fallback_f32);

  std::vector<float> row;
  w.write(out, [&](size_t i, std::byte* dst) {
    if (const TensorView* s = sources[i]) {
      encode_tensor_rows(*s, w.tensors()[i].dtype, dst, row);
    } else if (i == 0) {
      std::memcpy(dst, rope.data(), rope.size() * 4);
    } else {
      for (int64_t k = 0; k < ordering->numel(); ++k) {
        const int64_t v = ordering->value(k);
        std::memcpy(dst + 8 * k, &v, 8);
      }
    }
  });
  return rep;
}

}  // namespace g4
