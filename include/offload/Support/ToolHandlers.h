//===- ToolHandlers.h - Fatal errors, out of memory and crashes of a tool -*- C++ -*-===//
//
// Part of offload. What the compiler's tools (offload-opt, offload-import,
// offload-translate) do when something fails outside the ordinary error
// paths:
//
//   * LLVM's fatal errors (report_fatal_error: an I/O error on an output
//     stream, ...) and its out-of-memory reports (a failed `new`, once
//     llvm::InitLLVM installed its new-handler) print "TOOL: error: ..." and
//     exit with status 1 after removing the staged output temporaries
//     (OutputFiles.h), instead of aborting;
//   * a crash signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) writes a fixed
//     line, removes the staged temporaries and arms alarm(): LLVM's own crash
//     handler, which runs next and prints a stack trace, allocates, and
//     deadlocks when the crash happened inside malloc; the alarm ends the
//     process then (SIGALRM) rather than letting it hang. The handler itself
//     only calls write(), unlink() and alarm() (async-signal-safe) and runs
//     on an alternate stack, so a stack overflow reaches it;
//   * SIGINT, SIGTERM, SIGHUP and SIGPIPE (a reader that went away) remove
//     the staged temporaries too, then take their usual course.
//
// Call installToolHandlers after llvm::InitLLVM (whose handlers are chained).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_SUPPORT_TOOLHANDLERS_H
#define OFFLOAD_SUPPORT_TOOLHANDLERS_H

namespace offload {

/// Seconds the chained crash handler may take before SIGALRM ends the
/// process.
constexpr unsigned kCrashHandlerSeconds = 10;

/// Installs the handlers above for the tool `toolName` (a string literal or
/// other storage that outlives the process); `crashHandlerSeconds` is the
/// alarm armed on a crash.
void installToolHandlers(const char *toolName,
                         unsigned crashHandlerSeconds = kCrashHandlerSeconds);

} // namespace offload

#endif
