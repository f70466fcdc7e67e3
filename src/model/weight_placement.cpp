#include "model/weight_placement.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "platform/error.h"
#include "platform/huge_pages.h"
#include "platform/mapped_file.h"

namespace g4 {

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

std::string mib(uint64_t b) { return std::to_string((b + kMiB / 2) / kMiB) + " MiB"; }

// Reserve kept free for the KV cache, activations and the rest of the system.
uint64_t reserve_for(uint64_t mem_total) { return std::max<uint64_t>(uint64_t(1) << 30, mem_total / 10); }

uint64_t meminfo_field(const char* key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  const size_t klen = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, klen, key) == 0 && line.size() > klen && line[klen] == ':') {
      std::istringstream in(line.substr(klen + 1));
      uint64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
  return 0;
}

}  // namespace

WeightMemory weight_memory_from_flag(const std::string& flag) {
  if (flag == "auto") return WeightMemory::Auto;
  if (flag == "huge") return WeightMemory::Huge;
  if (flag == "mapped") return WeightMemory::Mapped;
  throw Error("--weight-memory '" + flag + "': expected auto, huge or mapped");
}

PlacementReport decide_placement(WeightMemory request, const std::string& thp_mode, uint64_t bytes,
                                 uint64_t mem_available, uint64_t mem_total) {
  PlacementReport r;
  r.placement = "mapped";
  if (request == WeightMemory::Mapped) {
    r.reason = "--weight-memory mapped";
    return r;
  }
  const bool thp = thp_mode == "always" || thp_mode == "madvise";
  if (request == WeightMemory::Huge) {
    if (bytes > mem_total)
      throw Error("--weight-memory huge: the streamed weights need " + mib(bytes) + " of anonymous memory but this machine has " +
                  mib(mem_total) + " in all");
    r.placement = "huge";
    r.reason = thp ? "--weight-memory huge" : "--weight-memory huge, but transparent huge pages are '" + thp_mode +
                                                  "' here: the copy will sit on 4 KiB pages";
    return r;
  }
  if (!thp) {
    r.reason = "transparent huge pages are '" + thp_mode + "' here: a copy would gain nothing over the mapping";
    return r;
  }
  const uint64_t reserve = reserve_for(mem_total);
  if (bytes + reserve > mem_available) {
    r.reason = "copying needs " + mib(bytes) + " + " + mib(reserve) + " reserve, MemAvailable is " + mib(mem_available);
    return r;
  }
  r.placement = "huge";
  r.reason = "THP '" + thp_mode + "', " + mib(bytes) + " + " + mib(reserve) + " reserve fits in MemAvailable " +
             mib(mem_available);
  return r;
}

namespace {

// The matrices a copy would move (not already in memory the model owns) and their bytes.
std::vector<const TensorView**> to_copy(Model& m, uint64_t* bytes) {
  std::vector<const TensorView**> slots;
  *bytes = 0;
  for (const TensorView** s : streamed_matrices(m.weights)) {
    if (m.owns((*s)->data)) continue;
    slots.push_back(s);
    *bytes += ((*s)->nbytes + 63) / 64 * 64;
  }
  return slots;
}

}  // namespace

PlacementReport plan_placement(Model& m, WeightMemory request) {
  uint64_t bytes = 0;
  const auto slots = to_copy(m, &bytes);
  PlacementReport r = decide_placement(request, transparent_hugepage_mode(), bytes, meminfo_field("MemAvailable"),
                                       meminfo_field("MemTotal"));
  r.tensors = int(slots.size());
  r.bytes = bytes;
  return r;
}

PlacementReport place_weights(Model& m, WeightMemory request, ThreadPool* pool) {
  uint64_t bytes = 0;
  const std::vector<const TensorView**> slots = to_copy(m, &bytes);
  PlacementReport r = decide_placement(request, transparent_hugepage_mode(), bytes, meminfo_field("MemAvailable"),
                                       meminfo_field("MemTotal"));
  if (r.placement != "huge" || slots.empty()) return r;

  const auto t0 = std::chrono::steady_clock::now();
  HugePageBuffer arena(bytes);
  // Pieces of at most 8 MiB so both threads share the big matrices.
  struct Piece {
    const std::byte* src;
    std::byte* dst;
    uint64_t n;
  };
  std::vector<Piece> pieces;
  std::vector<uint64_t> offsets;
  uint64_t off = 0;
  for (const TensorView** s : slots) {
    offsets.push_back(off);
    const TensorView& t = **s;
    for (uint64_t b = 0; b < t.nbytes; b += 8 * kMiB)
      pieces.push_back({t.data + b, arena.data() + off + b, std::min<uint64_t>(8 * kMiB, t.nbytes - b)});
    off += (t.nbytes + 63) / 64 * 64;
  }
  auto copy = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(pieces[size_t(i)].dst, pieces[size_t(i)].src, pieces[size_t(i)].n);
      if (m.mapped(pieces[size_t(i)].src)) release_mapped_pages(pieces[size_t(i)].src, pieces[size_t(i)].n);
    }
  };
  if (pool) pool->parallel_for(int64_t(pieces.size()), copy);
  else copy(0, int64_t(pieces.size()), 0);

  for (size_t i = 0; i < slots.size(); ++i) {
    TensorView v = **slots[i];
    v.data = arena.data() + offsets[i];
    m.replace_view(slots[i], std::move(v));  // a tied embedding follows the head
  }
  r.tensors = int(slots.size());
  r.bytes = bytes;
  r.huge_bytes = arena.huge_bytes();
  m.owned_data.push_back(std::move(arena));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string describe_placement(const PlacementReport& r) {
  if (r.placement != "huge") return "mapped (" + r.reason + ")";
  if (r.tensors == 0) return "huge pages: nothing to copy (every streamed matrix already lives in memory g4 owns, e.g. re-encoded by --weights)";
  char buf[256];
  std::snprintf(buf, sizeof buf, "huge pages: %d matrices, %s copied in %.2f s into %s of 2 MiB pages (%s)", r.tensors,
                mib(r.bytes).c_str(), r.seconds, mib(r.huge_bytes).c_str(), r.reason.c_str());
  return buf;
}

}  // namespace g4
