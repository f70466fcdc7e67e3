// A read-only memory mapping of a whole file. Owns the mapping; tensor views point into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace g4 {

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
