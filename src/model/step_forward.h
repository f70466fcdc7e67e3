// Where a batch's forward pass runs. The engine hands every step to forward_cached (this CPU's
// kernels) unless it is given a StepForward: a device that runs the same rows with the same
// contract (forward_cached.h: rows of one sequence contiguous, starting at kv.length(seq); K/V
// written to and committed in `kv`; logits of the rows that want them, in row order).
#pragma once
#include <string>
#include <vector>

#include "model/forward_cached.h"
#include "model/kv_store.h"

namespace g4 {

class StepForward {
 public:
  virtual ~StepForward() = default;
  // logits: [n_wanted, V]; hidden (when non-null): the final-normed rows [n_wanted, H].
  virtual void forward(const std::vector<BatchRow>& rows, KvStore& kv, std::vector<float>& logits,
                       std::vector<float>* hidden) = 0;
  // A new cache starts using this device (an engine's constructor): whatever the device kept of
  // sequences of an earlier cache is forgotten, since sequence ids restart with each cache.
  virtual void attach(const KvStore& kv) = 0;
  virtual std::string name() const = 0;  // "vulkan:0 (NVIDIA L4)", for log and startup lines
  // Seconds the device spent on its batches so far, by its own clock (0 when it has none).
  virtual double device_seconds() const { return 0; }
};

}  // namespace g4
