// Atomic file replacement: bytes go to "<path>.tmp" in the same directory, which is renamed over
// `path` only once everything was written, flushed and closed without error. A reader (or a
// crash, or a full disk) therefore never sees a half-written `path`: it is the old file or the
// new one. On any failure the temporary file is removed and g4::Error names the file and what
// failed; an existing `path` is then left untouched.
#pragma once
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace g4 {

class AtomicFile {
 public:
  // Opens "<path>.tmp" for writing (truncating a stale one).
  explicit AtomicFile(std::filesystem::path path);
  // Without a commit() the temporary file is removed and `path` is left as it was.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Flushes, closes and renames the temporary file over `path`.
  void commit();

  const std::filesystem::path& temp_path() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& what);
  std::filesystem::path path_, tmp_;
  std::ofstream f_;
  bool done_ = false;
};

// Replaces `path` with `bytes` through an AtomicFile.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace g4
