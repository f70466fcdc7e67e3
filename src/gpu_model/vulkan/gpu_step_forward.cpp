#include "gpu_model/gpu_step_forward.h"

#include <algorithm>

#include "gpu_model/gemma4_gpu.h"
#include "platform/error.h"

namespace g4 {

GpuStepForward::GpuStepForward(const Model& m, const gpu::VulkanSession& session, gpu::GpuDecoderLimits limits)
    : model_(m), session_(session),
      decoder_(std::make_unique<gpu::GpuDecoder>(session, gpu_decoder_spec(m), limits)), slots_(limits.slots) {}

std::string GpuStepForward::name() const {
  return "vulkan:" + std::to_string(session_.info().index) + " (" + session_.info().name + ")";
}

void GpuStepForward::attach(const KvStore& kv) {
  attached_ = &kv;
  for (Slot& s : slots_) s = Slot{};
}

// Positions a slot needs from the host to continue a sequence at `length`: every one on a full
// layer, the window's W - 1 before it on a sliding one (the host ring holds at least those).
void GpuStepForward::load(uint32_t slot, int seq, int64_t length, KvStore& kv) {
  const ModelConfig& c = model_.config;
  std::vector<float> k, v;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerPlan& p = c.layers[i];
    if (p.kv_shared) continue;
    const int64_t begin = p.type == LayerType::Sliding ? std::max<int64_t>(0, length - (c.sliding_window - 1)) : 0;
    const size_t w = size_t(p.kv_heads) * size_t(p.head_dim), n = size_t(length - begin);
    k.resize(n * w), v.resize(n * w);
    if (n > 0) kv.read(int(i), seq, begin, length, k.data(), v.data());
    decoder_->load_kv(slot, int(i), begin, int64_t(n), k.data(), v.data());
  }
  ++stats_.slot_loads;
}

// The slot holding `seq`, valid through `length` (a rollback only shortens what the device
// wrote; anything longer came from elsewhere and is loaded again), else the least recently used
// slot this batch does not use, loaded from the host.
uint32_t GpuStepForward::slot_for(int seq, int64_t length, KvStore& kv, uint64_t tick) {
  for (uint32_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].seq == seq && slots_[i].device_length >= length) {
      slots_[i].last_use = tick;
      return i;
    }
  uint32_t best = uint32_t(slots_.size());
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].seq == seq) {  // held, but the host has positions the device never wrote
      best = i;
      break;
    }
    if (slots_[i].last_use == tick) continue;
    if (best == slots_.size() || slots_[i].last_use < slots_[best].last_use) best = i;
  }
  if (best == slots_.size())
    throw Error("gpu forward: a step holds more sequences than the device's " + std::to_string(slots_.size()) +
                " KV slots");
  if (length > 0) load(best, seq, length, kv);
  slots_[best] = Slot{seq, length, tick};
  return best;
}

void GpuStepForward::forward(const std::vector<BatchRow>& rows, KvStore& kv, std::vector<float>& logits,
                             std::vector<float>* hidden) {
  if (&kv != attached_) attach(kv);
  const uint64_t tick = ++clock_;
  std::vector<gpu::GpuRow> g(rows.size());
  struct Run {
    size_t begin, end;
    int seq;
    int64_t pos;
    uint32_t slot;
  };
  std::vector<Run> runs;
  for (size_t r = 0; r < rows.size(); ++r) {
    const BatchRow& b = rows[r];
    if (b.soft)
      throw Error("gpu forward: row " + std::to_string(r) + " carries an image's soft token; images run on the CPU "
                  "only (--device cpu)");
    if (runs.empty() || runs.back().seq != b.seq) {
      const int64_t length = kv.length(b.seq);
      if (b.pos != length)
        throw Error("gpu forward: sequence " + std::to_string(b.seq) + " starts at position " + std::to_string(b.pos) +
                    ", its cache holds " + std::to_string(length));
      runs.push_back(Run{r, r, b.seq, b.pos, slot_for(b.seq, length, kv, tick)});
    }
    runs.back().end = r + 1;
    g[r] = gpu::GpuRow{runs.back().slot, b.pos, b.token, b.want_logits};
  }
  gpu::GpuBatchResult out = decoder_->run(g, gpu::GpuBatchOptions{hidden != nullptr, true});
  const ModelConfig& c = model_.config;
  for (const Run& run : runs) {
    const int64_t n = int64_t(run.end - run.begin);
    for (size_t i = 0; i < c.layers.size(); ++i) {
      if (c.layers[i].kv_shared) continue;
      const size_t w = size_t(c.layers[i].kv_heads) * size_t(c.layers[i].head_dim);
      kv.write(int(i), run.seq, run.pos, n, &out.k[i][run.begin * w], &out.v[i][run.begin * w]);
    }
    kv.commit(run.seq, run.pos + n);
    slots_[run.slot].device_length = run.pos + n;
  }
  logits = std::move(out.logits);
  if (hidden) *hidden = std::move(out.hidden);
  ++stats_.batches;
  stats_.device_seconds += out.device_seconds.value_or(0.0);
}

}  // namespace g4
