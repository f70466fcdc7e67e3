// AtomicFile: OUT is replaced only when every byte was written; a failure removes OUT.tmp, leaves
// an existing OUT as it was and names the file in the error.
#include "platform/atomic_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace atomic_file_test {

namespace fs = std::filesystem;

TEST(AtomicFile, WritesAndRenames) {
  test::TempDir tmp;
  const fs::path out = tmp.path() / "out.bin";
  AtomicFile f(out);
  f.write("abc", 3);
  f.write(std::string_view("def"));
  EXPECT_TRUE(fs::exists(tmp.path() / "out.bin.tmp"));
  EXPECT_FALSE(fs::exists(out)) << "nothing appears under the final name before commit";
  f.commit();
  EXPECT_EQ(test::read_file(out), "abcdef");
  EXPECT_FALSE(fs::exists(tmp.path() / "out.bin.tmp"));
}

TEST(AtomicFile, ReplacesAnExistingFileOnlyOnCommit) {
  test::TempDir tmp;
  const fs::path out = tmp.path() / "out.txt";
  write_file_atomically(out, "old");
  {
    AtomicFile f(out);
    f.write(std::string_view("new, but abandoned"));
  }  // no commit: as if the writer threw half way
  EXPECT_EQ(test::read_file(out), "old");
  EXPECT_FALSE(fs::exists(tmp.path() / "out.txt.tmp"));
  write_file_atomically(out, "new");
  EXPECT_EQ(test::read_file(out), "new");
}

TEST(AtomicFile, MissingDirectoryNamesThePathAndLeavesNothing) {
  test::TempDir tmp;
  const fs::path out = tmp.path() / "no-such-dir" / "out.bin";
  try {
    write_file_atomically(out, "x");
    ADD_FAILURE() << "wrote into a directory that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), out.string() + ".tmp: cannot open for writing");
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "no-such-dir"));
}

TEST(AtomicFile, RenameOntoADirectoryFailsAndRemovesTheTemp) {
  test::TempDir tmp;
  const fs::path out = tmp.path() / "taken";
  fs::create_directories(out / "inside");  // a non-empty directory cannot be renamed over
  try {
    write_file_atomically(out, "x");
    ADD_FAILURE() << "renamed over a directory";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(out.string() + ": cannot rename from " + out.string() + ".tmp: ", 0), 0u) << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "taken.tmp"));
  EXPECT_TRUE(fs::is_directory(out / "inside"));
}

// A full disk, as RLIMIT_FSIZE makes it (in a child, so the limit stays there): the write fails,
// the temporary file is removed and the old OUT survives. Exit status 0 when all of that held.
TEST(AtomicFile, FailedWriteKeepsTheOldFileAndRemovesTheTemp) {
  test::TempDir tmp;
  const fs::path out = tmp.path() / "big.bin";
  write_file_atomically(out, "old");
  const pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1 << 16, 1 << 16};
    setrlimit(RLIMIT_FSIZE, &lim);
    int code = 1;
    try {
      AtomicFile f(out);
      const std::vector<char> chunk(1 << 20, 'x');
      f.write(chunk.data(), chunk.size());
      f.commit();
    } catch (const Error& e) {
      const std::string want = out.string() + ".tmp: write failed (disk full?); nothing was left behind";
      code = std::string(e.what()) == want ? 0 : 2;
    }
    if (code == 0 && fs::exists(out.string() + ".tmp")) code = 3;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error, 2: another message, 3: the temporary file was left";
  EXPECT_EQ(test::read_file(out), "old");
  EXPECT_FALSE(fs::exists(out.string() + ".tmp"));
}

}  // namespace atomic_file_test
}  // namespace g4
