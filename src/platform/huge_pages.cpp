#include "platform/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "platform/error.h"

namespace g4 {

std::string transparent_hugepage_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!f || !std::getline(f, line)) return "unavailable";
  // The active mode is the bracketed word: "always [madvise] never".
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "unavailable";
  return line.substr(open + 1, close - open - 1);
}

HugePageBuffer::HugePageBuffer(uint64_t bytes) {
  if (bytes == 0) return;
  const uint64_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  map_bytes_ = rounded + kHugePage;  // slack to align the start to 2 MiB
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error("cannot map " + std::to_string(bytes >> 20) + " MiB of anonymous memory in 2 MiB pages: " +
                std::strerror(errno));
  map_ = p;
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
  data_ = reinterpret_cast<std::byte*>(aligned);
  size_ = bytes;
  // Advice only: under THP "never" the buffer still works, on 4 KiB pages (huge_bytes() says so).
  (void)::madvise(data_, rounded, MADV_HUGEPAGE);
}

HugePageBuffer::~HugePageBuffer() { release(); }

HugePageBuffer::HugePageBuffer(HugePageBuffer&& o) noexcept
    : map_(o.map_), map_bytes_(o.map_bytes_), data_(o.data_), size_(o.size_) {
  o.map_ = nullptr;
  o.map_bytes_ = 0;
  o.data_ = nullptr;
  o.size_ = 0;
}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& o) noexcept {
  if (this != &o) {
    release();
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    data_ = o.data_;
    size_ = o.size_;
    o.map_ = nullptr;
    o.map_bytes_ = 0;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void HugePageBuffer::release() {
  if (map_) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  data_ = nullptr;
  size_ = 0;
}

uint64_t HugePageBuffer::huge_bytes() const {
  if (!map_) return 0;
  std::ifstream f("/proc/self/smaps");
  if (!f) return 0;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(map_), hi = lo + map_bytes_;
  std::string line;
  uint64_t total = 0;
  bool inside = false;
  while (std::getline(f, line)) {
    // Mapping header: "start-end perms offset dev inode [path]"; the kernel may split our
    // mapping into several VMAs (huge and not), so sum every VMA inside [lo, hi).
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(':') > dash && std::isxdigit(static_cast<unsigned char>(line[0]))) {
      const size_t sp = line.find(' ');
      if (sp != std::string::npos && sp > dash) {
        const uintptr_t s = std::stoull(line.substr(0, dash), nullptr, 16);
        const uintptr_t e = std::stoull(line.substr(dash + 1, sp - dash - 1), nullptr, 16);
        inside = s >= lo && e <= hi;
        continue;
      }
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      std::istringstream in(line.substr(14));
      uint64_t kb = 0;
      in >> kb;
      total += kb * 1024;
    }
  }
  // smaps counts whole VMAs, which include the alignment slack around the buffer: cap at the
  // buffer's own huge pages.
  return std::min<uint64_t>(total, (size_ + kHugePage - 1) / kHugePage * kHugePage);
}

}  // namespace g4
