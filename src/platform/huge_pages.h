// Anonymous memory meant to be backed by 2 MiB transparent huge pages.
//
// Why: decode streams every weight once per token, and on a VM with nested paging reading
// through 4 KiB pages costs a TLB walk per page: slower and erratic (figures in docs/perf.md).
// The buffer asks for huge pages with MADV_HUGEPAGE and reports how many bytes the kernel really
// backed with them (smaps), so the claim is measured, never assumed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace g4 {

// The system's transparent-huge-page mode: "always", "madvise", "never", or "unavailable"
// (no /sys/kernel/mm/transparent_hugepage/enabled). MADV_HUGEPAGE works under always/madvise.
std::string transparent_hugepage_mode();

class HugePageBuffer {
 public:
  static constexpr uint64_t kHugePage = uint64_t(2) << 20;

  HugePageBuffer() = default;
  // Maps `bytes` (rounded up to 2 MiB) of zeroed anonymous memory aligned to 2 MiB and advises
  // huge pages. Throws g4::Error with the size and the OS reason when the mapping fails.
  explicit HugePageBuffer(uint64_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& o) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& o) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }  // usable bytes (as asked)
  // Bytes of this buffer the kernel currently backs with huge pages (AnonHugePages in
  // /proc/self/smaps for this mapping); 0 when that cannot be read.
  uint64_t huge_bytes() const;

 private:
  void release();
  void* map_ = nullptr;       // what mmap returned
  uint64_t map_bytes_ = 0;    // how much was mapped (with the alignment slack)
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace g4
