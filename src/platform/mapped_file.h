// A read-only memory mapping of a whole file. Owns the mapping; tensor views point into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace g4 {

// Exit status of a process killed by a read of a mapped file that shrank (or whose storage
// failed) while it was in use; see install_mapped_file_fault_handler().
inline constexpr int kMappedFileLostExitCode = 75;

// A file truncated while mapped makes the next read of a page past its new end raise SIGBUS,
// which would end the process anonymously. Every live MappedFile registers its range [base,
// base + size) and path in a fixed-size, lock-free table; this SIGBUS handler (SA_SIGINFO) looks
// the fault address up there and, when it is inside a mapping, writes with write(2)
//   g4: fatal: <path> was truncated (or its storage failed) while in use (access at byte offset N
//   of a mapping of M bytes); exiting
// and calls _exit(kMappedFileLostExitCode). Any other SIGBUS goes to the handler that was there
// before (the default action: killed by SIGBUS). Idempotent; the first MappedFile installs it.
void install_mapped_file_fault_handler();

// Drops this process's page-table entries for the whole pages inside [p, p + n) of a read-only
// file mapping (a MappedFile's): the page cache keeps the data and a later read faults it back
// in, so no value changes, but the process's RSS stops counting them (weights copied or
// re-encoded out of the checkpoint). Only whole pages: a neighbour may still be read through the
// mapping. Never for anonymous memory, where MADV_DONTNEED would zero it.
void release_mapped_pages(const std::byte* p, uint64_t n);

class MappedFile {
 public:
  MappedFile() = default;
  // Throws g4::Error naming the path on any failure (missing, unreadable, a directory).
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

  // Re-reads the file's size on disk; throws if it shrank below the mapped size
  // (a file truncated after validation must be refused before use, not read past its end).
  void check_unchanged() const;

 private:
  void release();
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace g4
