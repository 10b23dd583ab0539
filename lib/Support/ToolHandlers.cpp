//===- ToolHandlers.cpp - Fatal errors, out of memory and crashes of a tool ===//
//
// Part of offload. See include/offload/Support/ToolHandlers.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Support/ToolHandlers.h"
#include "offload/Support/OutputFiles.h"

#include "llvm/Support/ErrorHandling.h"

#include <csignal>
#include <cstring>
#include <string>
#include <unistd.h>

using namespace offload;

namespace {
const char *gToolName = "offload";
unsigned gCrashSeconds = kCrashHandlerSeconds;

/// write() of a C string, retried on a short write; async-signal-safe.
void writeAll(const char *s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= size_t(w);
  }
}

void fatalErrorHandler(void *, const char *reason, bool) {
  removeStagedTemporaries();
  writeAll(gToolName);
  writeAll(": error: ");
  writeAll(reason);
  writeAll("\n");
  ::_exit(1);
}

void badAllocHandler(void *, const char *reason, bool) {
  // No allocation here: the allocator just failed.
  removeStagedTemporaries();
  writeAll(gToolName);
  writeAll(": error: out of memory (");
  writeAll(reason ? reason : "allocation failed");
  writeAll("); give the process more memory (ulimit -v) or a smaller input\n");
  ::_exit(1);
}

/// The crash signals (a message and the alarm), then the ones that end a
/// process from outside (Ctrl-C, kill, a closed pipe): both remove the
/// staged temporaries before the handler installed earlier runs.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
                                 SIGINT,  SIGTERM, SIGHUP, SIGPIPE};
constexpr size_t kNumCrashes = 5;
struct sigaction gPrevious[sizeof(kCrashSignals) / sizeof(int)];
/// Set once the first crash signal arrived (a second one, from the chained
/// handler, goes straight on to it).
volatile sig_atomic_t gCrashing = 0;

void crashHandler(int sig, siginfo_t *info, void *context) {
  size_t k = 0;
  while (k < sizeof(kCrashSignals) / sizeof(int) && kCrashSignals[k] != sig)
    ++k;
  if (k >= kNumCrashes) {
    removeStagedTemporaries();
  } else if (!gCrashing) {
    gCrashing = 1;
    removeStagedTemporaries();
    writeAll(gToolName);
    writeAll(": internal error: crashed (");
    writeAll(sig == SIGSEGV   ? "SIGSEGV"
             : sig == SIGBUS  ? "SIGBUS"
             : sig == SIGILL  ? "SIGILL"
             : sig == SIGFPE  ? "SIGFPE"
                              : "SIGABRT");
    writeAll("); no output was written. Please report it with the command "
             "and its input files.\n");
    // LLVM's handler (chained below) prints a stack trace and allocates to do
    // so; if the crash was inside malloc, that would wait forever.
    ::alarm(gCrashSeconds);
  }
  // Chain to the handler that was installed before (LLVM's stack printer),
  // else the default action.
  if (k < sizeof(kCrashSignals) / sizeof(int)) {
    const struct sigaction &prev = gPrevious[k];
    if (prev.sa_flags & SA_SIGINFO) {
      if (prev.sa_sigaction) {
        prev.sa_sigaction(sig, info, context);
        return;
      }
    } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN &&
               prev.sa_handler != nullptr) {
      prev.sa_handler(sig);
      return;
    }
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// An alternate signal stack for this thread, so that a stack overflow can
/// still run the handler (LLVM installs one too; ours is used when it has
/// not).
void ensureAltStack() {
  stack_t current;
  if (::sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE) &&
      current.ss_size > 0)
    return;
  static char stackMemory[1 << 16];
  stack_t ss;
  ss.ss_sp = stackMemory;
  ss.ss_size = sizeof(stackMemory);
  ss.ss_flags = 0;
  (void)::sigaltstack(&ss, nullptr);
}
} // namespace

void offload::installToolHandlers(const char *toolName, unsigned crashHandlerSeconds) {
  gToolName = toolName;
  gCrashSeconds = crashHandlerSeconds;
  llvm::install_fatal_error_handler(fatalErrorHandler, nullptr);
  llvm::install_bad_alloc_error_handler(badAllocHandler, nullptr);
  ensureAltStack();
  for (size_t k = 0; k < sizeof(kCrashSignals) / sizeof(int); ++k) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = crashHandler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    (void)::sigaction(kCrashSignals[k], &sa, &gPrevious[k]);
    // A signal the parent ignores (nohup's SIGHUP) stays ignored.
    if (!(gPrevious[k].sa_flags & SA_SIGINFO) && gPrevious[k].sa_handler == SIG_IGN)
      (void)::sigaction(kCrashSignals[k], &gPrevious[k], nullptr);
  }
}
