#include "platform/atomic_file.h"

#include <system_error>

#include "platform/error.h"

namespace g4 {

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  f_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!f_) throw Error(tmp_.string() + ": cannot open for writing");
}

AtomicFile::~AtomicFile() {
  if (done_) return;
  f_.close();
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void AtomicFile::fail(const std::string& what) {
  f_.close();
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
  done_ = true;
  throw Error(what);
}

void AtomicFile::write(const void* data, size_t n) {
  f_.write(static_cast<const char*>(data), std::streamsize(n));
  if (!f_) fail(tmp_.string() + ": write failed (disk full?); nothing was left behind");
}

void AtomicFile::commit() {
  f_.flush();
  if (f_) f_.close();
  if (!f_) fail(tmp_.string() + ": write failed (disk full?); nothing was left behind");
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) fail(path_.string() + ": cannot rename from " + tmp_.string() + ": " + ec.message());
  done_ = true;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace g4
