#include "platform/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "platform/error.h"

namespace g4 {

namespace {

// The table of live mappings the SIGBUS handler reads. Fixed size, no allocation, only
// lock-free atomics: a slot is claimed (free -> busy), filled, then published (busy -> live);
// the handler reads live slots only. With every slot taken a mapping goes unregistered (its
// SIGBUS stays anonymous); real checkpoints use a handful of files.
constexpr int kSlots = 256;
constexpr size_t kPathBytes = 512;
enum : int { kFree = 0, kBusy = 1, kLive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  std::atomic<uintptr_t> base{0};
  std::atomic<uint64_t> size{0};  // the file's size when mapped
  std::atomic<uint64_t> span{0};  // what the mapping covers: size rounded up to whole pages
  char path[kPathBytes] = {};
};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<uintptr_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);
Slot g_slots[kSlots];
struct sigaction g_previous_sigbus {};

void register_mapping(const void* base, uint64_t size, const std::string& path) {
  for (Slot& s : g_slots) {
    int expected = kFree;
    if (!s.state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) continue;
    const size_t n = std::min(path.size(), kPathBytes - 1);
    std::memcpy(s.path, path.data(), n);
    s.path[n] = '\0';
    s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_relaxed);
    s.size.store(size, std::memory_order_relaxed);
    const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
    s.span.store((size + page - 1) / page * page, std::memory_order_relaxed);
    s.state.store(kLive, std::memory_order_release);
    return;
  }
}

void unregister_mapping(const void* base) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kLive || s.base.load(std::memory_order_relaxed) != b) continue;
    int expected = kLive;
    if (!s.state.compare_exchange_strong(expected, kBusy, std::memory_order_acq_rel)) continue;
    s.base.store(0, std::memory_order_relaxed);
    s.size.store(0, std::memory_order_relaxed);
    s.span.store(0, std::memory_order_relaxed);
    s.state.store(kFree, std::memory_order_release);
    return;
  }
}

// Async-signal-safe formatting: appends into a fixed buffer, never allocates.
struct SignalText {
  char buf[kPathBytes + 256];
  size_t n = 0;
  void add(const char* s) {
    while (*s && n < sizeof buf) buf[n++] = *s++;
  }
  void add(uint64_t v) {
    char d[24];
    int k = 0;
    do {
      d[k++] = char('0' + v % 10);
      v /= 10;
    } while (v);
    while (k > 0 && n < sizeof buf) buf[n++] = d[--k];
  }
  void write_to(int fd) const {
    size_t off = 0;
    while (off < n) {
      const ssize_t w = ::write(fd, buf + off, n - off);
      if (w > 0) {
        off += size_t(w);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else {
        return;
      }
    }
  }
};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kLive) continue;
    const uintptr_t base = s.base.load(std::memory_order_relaxed);
    const uint64_t size = s.size.load(std::memory_order_relaxed);
    if (addr < base || addr - base >= s.span.load(std::memory_order_relaxed)) continue;
    SignalText t;
    t.add("g4: fatal: ");
    t.add(s.path);
    t.add(" was truncated (or its storage failed) while in use (access at byte offset ");
    t.add(uint64_t(addr - base));
    t.add(" of a mapping of ");
    t.add(size);
    t.add(" bytes); exiting\n");
    t.write_to(STDERR_FILENO);
    _exit(kMappedFileLostExitCode);
  }
  // Not one of ours: give it to the handler that was there before. A fault re-runs the faulting
  // instruction on return and so arrives there; a SIGBUS sent with kill() is sent again.
  const int saved_errno = errno;
  ::sigaction(SIGBUS, &g_previous_sigbus, nullptr);
  if (info->si_code <= 0) ::raise(sig);
  errno = saved_errno;
}

}  // namespace

void install_mapped_file_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    ::sigaction(SIGBUS, nullptr, &g_previous_sigbus);
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO;
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(path.string() + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path.string() + ": not a regular file");
  }
  size_ = uint64_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error(path.string() + ": mmap failed: " + std::strerror(e));
    }
    data_ = static_cast<const std::byte*>(p);
    install_mapped_file_fault_handler();
    register_mapping(data_, size_, path.string());
  }
  ::close(fd);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void release_mapped_pages(const std::byte* p, uint64_t n) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (hi > lo) (void)::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void MappedFile::release() {
  if (data_) {
    unregister_mapping(data_);
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::check_unchanged() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0)
    throw Error(path_.string() + ": vanished after it was mapped: " + std::strerror(errno));
  if (uint64_t(st.st_size) < size_)
    throw Error(path_.string() + ": truncated after validation: now " + std::to_string(st.st_size) +
                " bytes, was " + std::to_string(size_) + " when mapped; refusing to read past its end");
}

}  // namespace g4
