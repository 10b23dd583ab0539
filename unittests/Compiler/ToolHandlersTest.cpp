//===- ToolHandlersTest.cpp - Fatal errors, out of memory, crashes, JSON ---===//
//
// Part of offload. Issue 34: the compiler tools' handlers (ToolHandlers.h)
// end the process with a message and without temporaries on a fatal error,
// an out-of-memory report and a crash -- also when the crash handler that
// runs after ours (LLVM's stack printer) never returns, as it did when a
// crash inside malloc left the allocator's lock taken; and the bounded JSON
// reader (BoundedJson.h) refuses deep nesting before parsing. Each handler
// case runs in a child process (fork).
//
//===----------------------------------------------------------------------===//

#include "offload/Support/BoundedJson.h"
#include "offload/Support/OutputFiles.h"
#include "offload/Support/ToolHandlers.h"

#include "llvm/Support/ErrorHandling.h"
#include "gtest/gtest.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

/// A fresh directory for one test's files.
std::string freshDir() {
  char pattern[] = "/tmp/offload-toolhandlers-XXXXXX";
  const char *d = ::mkdtemp(pattern);
  return d ? d : "";
}

/// Names in `dir` that contain ".tmp-".
int temporariesIn(const std::string &dir) {
  int n = 0;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d))
      if (std::string(e->d_name).find(".tmp-") != std::string::npos)
        ++n;
    ::closedir(d);
  }
  return n;
}

std::string readAll(const std::string &path) {
  std::string text;
  if (FILE *f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
      text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

/// Runs `body` in a child whose stderr goes to DIR/stderr, after the tool
/// handlers were installed and an output DIR/out.txt was staged; returns the
/// child's wait status (or -1 when it did not end within 30 s).
template <typename Body> int inChild(const std::string &dir, Body body, unsigned alarmSeconds = 1) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open((dir + "/stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    offload::installToolHandlers("test-tool", alarmSeconds);
    offload::OutputFiles &files = offload::OutputFiles::process();
    files.deferUntilCommit();
    std::string tmp;
    if (!files.stage(dir + "/out.txt", tmp).empty() || temporariesIn(dir) != 1)
      ::_exit(99);
    body();
    ::_exit(98);
  }
  auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

TEST(ToolHandlersTest, FatalErrorIsAMessageAndExitOne) {
  std::string dir = freshDir();
  int status = inChild(dir, [] { llvm::report_fatal_error("IO failure on output stream", false); });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_EQ(readAll(dir + "/stderr"), "test-tool: error: IO failure on output stream\n");
  EXPECT_EQ(temporariesIn(dir), 0);
}

TEST(ToolHandlersTest, OutOfMemoryIsAMessageAndExitOne) {
  std::string dir = freshDir();
  int status = inChild(dir, [] { llvm::report_bad_alloc_error("Allocation failed"); });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(readAll(dir + "/stderr").find("test-tool: error: out of memory (Allocation failed)"),
            std::string::npos);
  EXPECT_EQ(temporariesIn(dir), 0);
}

TEST(ToolHandlersTest, FailedNewIsAMessageAndExitOne) {
  // What llvm::InitLLVM's new-handler does when `new` fails.
  std::string dir = freshDir();
  int status = inChild(dir, [] {
    std::set_new_handler([] { llvm::report_bad_alloc_error("Allocation failed"); });
    volatile size_t huge = size_t(1) << 62;
    // operator new itself, which the compiler may not elide.
    void *volatile p = ::operator new(huge);
    (void)p;
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_EQ(temporariesIn(dir), 0);
}

/// The handler that runs after ours and never returns (LLVM's stack printer
/// waiting for the allocator's lock that the crashed code held).
void hangForever(int) {
  for (;;)
    ::pause();
}

TEST(ToolHandlersTest, CrashEndsEvenWhenTheNextHandlerHangs) {
  std::string dir = freshDir();
  int status = inChild(dir, [] {
    // Installed before ours (as LLVM's printer is), so ours chains to it.
    struct sigaction sa = {};
    sa.sa_handler = hangForever;
    ::sigaction(SIGSEGV, &sa, nullptr);
    offload::installToolHandlers("test-tool", 1);
    ::raise(SIGSEGV);
  });
  ASSERT_NE(status, -1) << "the crashed process hung";
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGALRM);
  EXPECT_NE(readAll(dir + "/stderr").find("test-tool: internal error: crashed (SIGSEGV)"),
            std::string::npos);
  EXPECT_EQ(temporariesIn(dir), 0);
}

TEST(ToolHandlersTest, TerminationRemovesTemporaries) {
  std::string dir = freshDir();
  int status = inChild(dir, [] { ::raise(SIGTERM); });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(temporariesIn(dir), 0);
}

TEST(BoundedJsonTest, DepthIsCheckedBeforeParsing) {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  std::string error;
  EXPECT_TRUE(failed(offload::parseBoundedJson(deep, "x.json", error)));
  EXPECT_NE(error.find("nested more than 512 deep (at byte 512)"), std::string::npos) << error;
  // Brackets inside strings do not count; 512 levels are accepted.
  std::string ok = std::string(512, '[') + "\"[[[{{\\\"[\"" + std::string(512, ']');
  EXPECT_TRUE(succeeded(offload::parseBoundedJson(ok, "ok.json", error))) << error;
  EXPECT_EQ(offload::checkJsonDepth(std::string(513, '{')),
            "arrays and objects nested more than 512 deep (at byte 512); this limit is fixed "
            "(deeper nesting would overflow the parser's stack)");
}

TEST(BoundedJsonTest, SizeLimitNamesItsVariable) {
  std::string dir = freshDir();
  std::string path = dir + "/t.json";
  FILE *f = std::fopen(path.c_str(), "w");
  std::fputs("{\"name\": \"x\"}", f);
  std::fclose(f);
  ::setenv("OFFLOAD_MAX_TARGET_JSON_BYTES", "4", 1);
  std::string error;
  EXPECT_TRUE(failed(offload::readJsonFile(path, offload::JsonKind::Target, error)));
  EXPECT_EQ(error, "target file '" + path + "' has 13 bytes, more than the limit of 4 bytes "
                   "(set OFFLOAD_MAX_TARGET_JSON_BYTES=BYTES to raise it)");
  ::unsetenv("OFFLOAD_MAX_TARGET_JSON_BYTES");
  EXPECT_TRUE(succeeded(offload::readJsonFile(path, offload::JsonKind::Target, error))) << error;
  EXPECT_TRUE(failed(offload::readJsonFile("/dev/zero", offload::JsonKind::Target, error)));
  EXPECT_EQ(error, "target file '/dev/zero' is a character device, not a regular file; give a "
                   "file");
}

} // namespace
