// Where the streamed weight matrices live while the model runs.
//
// "mapped": read straight from the checkpoint's memory mapping (the page cache, 4 KiB pages).
// "huge":   copied once, in their checkpoint dtype (no upcast), into anonymous memory backed by
//           2 MiB transparent huge pages; the mapping's pages of those tensors are released.
// "auto":   huge when the kernel offers THP (always/madvise) and the copy fits in MemAvailable
//           with a reserve; mapped otherwise, with the reason.
// Decode reads every streamed matrix once per token, so on a machine where 4 KiB-page reads
// are slow and erratic (nested paging in a VM: a TLB walk per page) this placement decides
// most of decode speed; `g4 bench` shows both. Gathered tables (the per-layer embeddings, an
// untied token embedding) stay mapped: a token reads one row of them.
#pragma once
#include <cstdint>
#include <string>

#include "model/model.h"
#include "platform/thread_pool.h"

namespace g4 {

enum class WeightMemory { Auto, Mapped, Huge };

// "auto" | "huge" | "mapped"; throws g4::Error naming the flag otherwise.
WeightMemory weight_memory_from_flag(const std::string& flag);

struct PlacementReport {
  std::string placement;     // "huge" or "mapped": what was done
  std::string reason;        // why (with the arithmetic when memory decided it)
  int tensors = 0;           // matrices copied
  uint64_t bytes = 0;        // bytes copied
  uint64_t huge_bytes = 0;   // of those, bytes the kernel backs with 2 MiB pages (smaps)
  double seconds = 0;        // copy time
};

// The decision alone, as a pure function (tested as a table): thp_mode from
// transparent_hugepage_mode(), bytes to copy, MemAvailable and MemTotal in bytes.
// A forced "huge" that cannot fit in MemTotal throws with the arithmetic.
PlacementReport decide_placement(WeightMemory request, const std::string& thp_mode, uint64_t bytes,
                                 uint64_t mem_available, uint64_t mem_total);

// The decision for this model on this machine, without copying (for `g4 info`): bytes and
// tensors are what a copy would move.
PlacementReport plan_placement(Model& m, WeightMemory request);

// Decides, then copies the streamed matrices (see streamed_matrices) into one huge-page arena
// owned by `m` and re-points the weight views; matrices already in memory `m` owns (re-encoded
// by --weights q8|q4) are left where they are. Copies run on `pool` when given.
PlacementReport place_weights(Model& m, WeightMemory request, ThreadPool* pool);

// One line for logs and `g4 info`: "huge pages: 210 matrices, 4347 MiB (4346 MiB on 2 MiB pages)
// copied in 1.9 s" or "mapped: <reason>".
std::string describe_placement(const PlacementReport& r);

}  // namespace g4
