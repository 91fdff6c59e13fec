// ScopedTempDir and ProcessTempDir: fresh directories under $TEST_TMPDIR, removed with their
// contents at scope end and at process exit respectively.
#include "tests/support/scoped_temp_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace splitspec::testing {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path) { std::ofstream(path) << "x"; }

TEST(ScopedTempDirTest, RemovesItsTreeAtScopeEnd) {
  std::string path;
  {
    ScopedTempDir dir("scoped_temp_dir_test_");
    path = dir.path();
    ASSERT_TRUE(fs::is_directory(path));
    EXPECT_TRUE(fs::is_empty(path));
    EXPECT_NE(path.find("/scoped_temp_dir_test_"), std::string::npos) << path;
    EXPECT_EQ(dir.Join("a"), path + "/a");
    fs::create_directories(dir.Join("nested/deeper"));
    WriteFile(dir.Join("nested/deeper/file"));
    ScopedTempDir other("scoped_temp_dir_test_");
    EXPECT_NE(other.path(), path) << "every ScopedTempDir is a new directory";
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(ScopedTempDirTest, LivesUnderTestTmpdir) {
  ScopedTempDir root("scoped_temp_dir_root_");
  const char* saved = std::getenv("TEST_TMPDIR");
  const std::string saved_value = saved ? saved : "";
  setenv("TEST_TMPDIR", root.path().c_str(), 1);
  {
    ScopedTempDir dir("inner_");
    EXPECT_EQ(fs::path(dir.path()).parent_path(), fs::path(root.path()));
  }
  if (saved) {
    setenv("TEST_TMPDIR", saved_value.c_str(), 1);
  } else {
    unsetenv("TEST_TMPDIR");
  }
  EXPECT_TRUE(fs::is_empty(root.path()));
}

TEST(ProcessTempDirTest, OneDirectoryPerPrefixRemovedAtExit) {
  ScopedTempDir root("process_temp_dir_test_");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::fflush(nullptr);  // the child's exit flushes stdio: do not print the parent's buffer twice
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A child process stands for a test binary: it makes its directories and exits normally.
    setenv("TEST_TMPDIR", root.path().c_str(), 1);
    const std::string& a = ProcessTempDir("models_");
    const std::string& again = ProcessTempDir("models_");
    const std::string& b = ProcessTempDir("other_");
    WriteFile(a + "/weights");
    const bool ok = &a == &again && a != b && fs::is_directory(a) && fs::is_directory(b);
    const std::string report = (ok ? "ok " : "bad ") + a + "\n";
    if (write(fds[1], report.data(), report.size()) < 0) _exit(3);
    std::exit(0);  // runs the atexit handler, unlike _exit
  }
  close(fds[1]);
  std::string report;
  char c;
  while (read(fds[0], &c, 1) == 1) report.push_back(c);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(report.rfind("ok ", 0), 0u) << report;
  EXPECT_NE(report.find(root.path()), std::string::npos) << report;
  EXPECT_TRUE(fs::is_empty(root.path())) << "the child's directories outlived it";
}

// A forked child that exits normally (runs atexit handlers) keeps its hands off the directories
// its parent made.
TEST(ProcessTempDirTest, AForkedChildDoesNotRemoveItsParentsDirectories) {
  const std::string& dir = ProcessTempDir("process_temp_dir_parent_");
  WriteFile(dir + "/kept");
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const bool same = ProcessTempDir("process_temp_dir_parent_") == dir;
    std::exit(same ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child sees its parent's directory";
  EXPECT_TRUE(fs::exists(dir + "/kept"));
}

}  // namespace
}  // namespace splitspec::testing
