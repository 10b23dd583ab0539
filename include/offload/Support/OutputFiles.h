//===- OutputFiles.h - Output files written only when a command succeeds -*- C++ -*-===//
//
// Part of offload. The one way the tools (offload-import, offload-opt,
// offload-run) write their output files:
//
//   * a destination that exists and is not a regular file (a directory, a
//     device such as /dev/null, a FIFO, a socket) is refused, never replaced;
//     so is one whose directory does not exist -- checked when the output is
//     staged, before any work;
//   * the bytes go to a temporary file next to the destination, and the
//     temporaries are renamed over their destinations only at commit(),
//     which a tool calls once the whole command has succeeded. A failed
//     command leaves every destination as it was (the destructor removes the
//     temporaries).
//
// Standard C++ and POSIX only: the runtime's tool uses it without MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_SUPPORT_OUTPUTFILES_H
#define OFFLOAD_SUPPORT_OUTPUTFILES_H

#include <string>
#include <utility>
#include <vector>

namespace offload {

/// "" when `path` may be an output file: it does not exist and its directory
/// does, or it is a regular file. Otherwise an error naming the path and why
/// ("'/dev/null' is a character device, not a regular file; refusing to
/// replace it").
std::string checkOutputPath(const std::string &path);

/// The output files of one command, committed together.
class OutputFiles {
public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;
  /// Removes the temporaries of outputs never committed.
  ~OutputFiles();

  /// The set a tool's main commits (offload-opt's passes stage their files
  /// here).
  static OutputFiles &process();

  /// Stages `path`: checks it (checkOutputPath) and sets `tmp` to a fresh
  /// temporary path in the same directory, for the caller to write. Returns
  /// "" or the error.
  std::string stage(const std::string &path, std::string &tmp);
  /// Stages `path` and writes `bytes` to its temporary; commits at once
  /// unless deferUntilCommit() was called (a pass that writes a file in a
  /// driver that never commits still writes it).
  std::string write(const std::string &path, const void *bytes, size_t size);

  /// From now on write() leaves its output staged until commit(): a tool's
  /// main calls this before running anything.
  void deferUntilCommit() { deferred_ = true; }

  /// Renames every staged temporary over its destination, in staging order;
  /// "" or the first error (the outputs after it stay uncommitted).
  std::string commit();
  /// Removes every staged temporary; destinations are untouched.
  void discard();
  /// Whether nothing is staged.
  bool empty() const { return staged_.empty(); }

private:
  std::vector<std::pair<std::string, std::string>> staged_; // (tmp, dest)
  bool deferred_ = false;
};

} // namespace offload

#endif
