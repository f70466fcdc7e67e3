// Helpers shared by the libFuzzer targets in fuzz/ (built with -DG4_FUZZ=ON, run by scripts/fuzz.sh).
//
// What every target asserts, beyond "no crash" and "no sanitizer report" (ASan: no read past a
// buffer, UBSan: no undefined behaviour; libFuzzer's -malloc_limit_mb: no single allocation over
// the stated cap, -rss_limit_mb: no runaway memory):
//   * a refusal is a g4::Error (or the server's ApiError) with a non-empty message; any other
//     exception escaping a parser of outside data is a finding (G4_FUZZ_CHECK aborts);
//   * what a parser accepts is usable: every tensor view lies inside its file, every token id is
//     inside the vocabulary, and so on (per target).
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "platform/error.h"

#define G4_FUZZ_CHECK(cond)                                                             \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "G4_FUZZ_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace g4::fuzz {

// A refusal must say what is wrong.
inline void check_error(const g4::Error& e) {
  G4_FUZZ_CHECK(e.what() != nullptr && std::string_view(e.what()).size() > 0);
}

// A private scratch directory (under /dev/shm when it exists: no disk traffic per execution),
// removed at exit.
inline std::filesystem::path& scratch_dir_storage() {
  static std::filesystem::path dir;
  return dir;
}
inline const std::filesystem::path& scratch_dir() {
  auto& dir = scratch_dir_storage();
  if (dir.empty()) {
    std::filesystem::path base =
        std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path();
    dir = base / ("g4-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir_storage(), ec);
    });
  }
  return dir;
}

// Writes bytes to `path` (replacing it).
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  G4_FUZZ_CHECK(f != nullptr);
  if (!bytes.empty()) G4_FUZZ_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  G4_FUZZ_CHECK(std::fclose(f) == 0);
}

// Touches the first and last byte of [p, p+n): a view past the end of its mapping faults here.
inline unsigned touch(const std::byte* p, uint64_t n) {
  if (n == 0) return 0;
  G4_FUZZ_CHECK(p != nullptr);
  volatile const std::byte* v = p;
  return unsigned(v[0]) + unsigned(v[n - 1]);
}

}  // namespace g4::fuzz
