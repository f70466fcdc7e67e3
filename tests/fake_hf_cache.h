// A Hugging Face hub cache written the way huggingface_hub writes it, for the tests of models by
// name: files live once in blobs/<sha>, and snapshots/<commit>/<file> are relative symlinks to them.
#pragma once
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "test_util.h"

namespace g4::test {

class FakeHfRepo {
 public:
  // root/models--org--name, created empty.
  FakeHfRepo(const std::filesystem::path& root, const std::string& org, const std::string& name)
      : dir_(root / ("models--" + org + "--" + name)) {
    std::filesystem::create_directories(dir_ / "blobs");
  }
  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path snapshot(const std::string& commit) const { return dir_ / "snapshots" / commit; }

  // Stores bytes as a blob and links snapshots/<commit>/<file> to it ("../../blobs/<sha>", one more
  // "../" per folder in file). Returns the blob's path.
  std::filesystem::path add(const std::string& commit, const std::string& file, const std::string& bytes) {
    const std::filesystem::path blob = dir_ / "blobs" / blob_name(commit + "/" + file);
    std::ofstream(blob, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    link(commit, file, blob.filename().string());
    return blob;
  }
  // Links a file to a blob that is not there (what a deleted or unfinished blob leaves).
  std::filesystem::path add_dangling(const std::string& commit, const std::string& file) {
    const std::string sha = blob_name(commit + "/" + file);
    link(commit, file, sha);
    return dir_ / "blobs" / sha;
  }
  void copy_in(const std::string& commit, const std::string& file, const std::filesystem::path& from) {
    add(commit, file, read_file(from));
  }
  void ref(const std::string& name, const std::string& commit) {
    const auto p = dir_ / "refs" / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << commit;  // huggingface_hub writes no newline
  }

 private:
  // 64 hex digits derived from the name: a stand-in for the file's sha256, unique per file here.
  static std::string blob_name(const std::string& key) {
    std::string out;
    for (int i = 0; i < 4; ++i) {
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016zx", std::hash<std::string>{}(key + char('0' + i)));
      out += buf;
    }
    return out;
  }
  void link(const std::string& commit, const std::string& file, const std::string& sha) {
    const auto at = snapshot(commit) / file;
    std::filesystem::create_directories(at.parent_path());
    std::string up = "../";
    const std::filesystem::path rel(file);
    for (auto it = rel.begin(); it != rel.end(); ++it) up += "../";
    std::filesystem::create_symlink(up + "blobs/" + sha, at);
  }

  std::filesystem::path dir_;
};

// Commits as the hub writes them: 40 lowercase hex digits.
inline std::string fake_commit(char c) { return std::string(40, c); }

}  // namespace g4::test
