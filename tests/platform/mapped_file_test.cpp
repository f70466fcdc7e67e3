// MappedFile: the mapping itself, and what happens when the file shrinks while it is mapped
// (issue 8): a read past the new end raises SIGBUS, which the handler installed with the first
// mapping turns into a named fatal error and exit status kMappedFileLostExitCode (75).
// Each fault runs in a fork()ed child so the test process survives; the child's stderr goes to a
// file the parent reads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "platform/error.h"
#include "platform/mapped_file.h"
#include "test_util.h"

namespace g4 {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// What a fork()ed child left: its stderr and its raw wait status.
struct ChildResult {
  std::string err;
  int status = 0;
};

// Runs body in a fork()ed child with stderr redirected to a file; the child _exits 0 if body returns.
ChildResult in_child(const fs::path& err_file, const std::function<void()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    body();
    _exit(0);
  }
  ChildResult r;
  waitpid(pid, &r.status, 0);
  r.err = test::read_file(err_file);
  return r;
}

uint8_t touch(const std::byte* p) { return uint8_t(*reinterpret_cast<const volatile uint8_t*>(p)); }

TEST(MappedFile, MapsTheWholeFileAndNamesMissingOnes) {
  TempDir tmp;
  const fs::path f = tmp / "a.bin";
  test::write_file(f, "hello mapped world");
  MappedFile m(f);
  ASSERT_EQ(m.size(), 18u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m.data()), 5), "hello");
  EXPECT_NO_THROW(m.check_unchanged());
  MappedFile moved(std::move(m));
  EXPECT_EQ(moved.size(), 18u);
  EXPECT_EQ(m.data(), nullptr);
  try {
    MappedFile missing(tmp / "nope.bin");
    ADD_FAILURE() << "mapped a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope.bin"), std::string::npos) << e.what();
  }
}

TEST(MappedFile, TruncatedWhileMappedIsANamedFatalError) {
  TempDir tmp;
  const fs::path f = tmp / "weights.bin";
  const long page = sysconf(_SC_PAGESIZE);
  test::write_file(f, std::string(size_t(page) * 4, 'w'));
  MappedFile m(f);
  ASSERT_EQ(touch(m.data() + 3 * page), 'w');
  fs::resize_file(f, uint64_t(page));  // after the size was validated, as a concurrent writer would
  EXPECT_THROW(m.check_unchanged(), Error);

  const ChildResult r = in_child(tmp / "child.err", [&] {
    touch(m.data() + 2 * page + 5);  // past the new end: SIGBUS
  });
  ASSERT_TRUE(WIFEXITED(r.status)) << "status " << r.status
                                   << (WIFSIGNALED(r.status) ? " killed by signal " + std::to_string(WTERMSIG(r.status)) : "")
                                   << "\n" << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), kMappedFileLostExitCode) << r.err;
  EXPECT_NE(r.err.find("g4: fatal: " + f.string() + " was truncated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("byte offset " + std::to_string(2 * page + 5)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mapping of " + std::to_string(4 * page) + " bytes"), std::string::npos) << r.err;

  // Reads inside what is left still work in the parent.
  EXPECT_EQ(touch(m.data() + page - 1), 'w');
}

TEST(MappedFile, OtherSigbusKeepsItsUsualEnd) {
  // A SIGBUS outside every MappedFile is not ours: the handler must pass it on, not claim it.
  TempDir tmp;
  const fs::path f = tmp / "other.bin";
  const long page = sysconf(_SC_PAGESIZE);
  test::write_file(f, std::string(size_t(page) * 2, 'o'));
  MappedFile keep(tmp.path() / "other.bin");  // installs the handler
  test::write_file(tmp / "raw.bin", std::string(size_t(page) * 2, 'r'));
  const int fd = ::open((tmp / "raw.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* raw = ::mmap(nullptr, size_t(page) * 2, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(raw, MAP_FAILED);
  fs::resize_file(tmp / "raw.bin", 0);

  const ChildResult r = in_child(tmp / "raw.err", [&] { touch(static_cast<const std::byte*>(raw) + page); });
  ::munmap(raw, size_t(page) * 2);
  EXPECT_EQ(r.err.find("g4: fatal"), std::string::npos) << r.err;
  EXPECT_FALSE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == kMappedFileLostExitCode) << r.err;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer's own handler was there before ours: it reports the fault and exits non-zero.
  EXPECT_TRUE(WIFSIGNALED(r.status) || (WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0)) << r.status << "\n" << r.err;
#else
  ASSERT_TRUE(WIFSIGNALED(r.status)) << "status " << r.status << "\n" << r.err;
  EXPECT_EQ(WTERMSIG(r.status), SIGBUS);
#endif

  // A SIGBUS sent with kill() reaches the default action too.
  const ChildResult k = in_child(tmp / "kill.err", [] { ::raise(SIGBUS); });
  EXPECT_EQ(k.err.find("g4: fatal"), std::string::npos) << k.err;
  EXPECT_FALSE(WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0) << "the child survived SIGBUS";
}

}  // namespace
}  // namespace g4
