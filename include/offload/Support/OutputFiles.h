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
//   * an output that is the same file as an input or as another output of
//     the same command (the same device and inode, or the same path once
//     its directory is resolved) is refused when it is staged or claimed,
//     naming both roles (`report=` naming `-o` or the input model;
//     `--params-out` naming `-o`);
//   * the temporaries staged so far are also removed by
//     removeStagedTemporaries(), which a crash handler may call (it only
//     unlinks, no allocation).
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

  /// Stages `path`: checks it (checkOutputPath, and that it is none of the
  /// inputs and other outputs of the command) and sets `tmp` to a fresh
  /// temporary path in the same directory, for the caller to write. `role`
  /// names the output in errors ("-o", "--params-out"). Returns "" or the
  /// error. A claim of the same file (claim()) is taken over.
  std::string stage(const std::string &path, std::string &tmp,
                    const std::string &role = "");
  /// Stages `path` and writes `bytes` to its temporary; commits at once
  /// unless deferUntilCommit() was called (a pass that writes a file in a
  /// driver that never commits still writes it).
  std::string write(const std::string &path, const void *bytes, size_t size,
                    const std::string &role = "");

  /// Records `path` as an input of the command under `role` ("the input",
  /// "target="): a later output that is the same file is refused; "" or an
  /// error when an output already staged or claimed is that file. Recorded
  /// only after deferUntilCommit() (in a tool's main).
  std::string addInput(const std::string &path, const std::string &role);
  /// Checks `path` as an output (checkOutputPath) before a pass does any
  /// work, and, after deferUntilCommit(), reserves it under `role` so that
  /// no other output or input of the command may be that file; the pass's
  /// later write() of it takes the reservation over. "" or the error.
  std::string claim(const std::string &path, const std::string &role);

  /// From now on write() leaves its output staged until commit(): a tool's
  /// main calls this before running anything.
  void deferUntilCommit() { deferred_ = true; }

  /// Renames every staged temporary over its destination, in staging order;
  /// "" or the first error (the outputs after it stay uncommitted).
  std::string commit();
  /// Removes every staged temporary; destinations are untouched.
  void discard();

  /// A failure that is a documented outcome, not an error of the input
  /// (the planner's "no plan fits the budget", kExitNoPlanFits): the tool
  /// exits with `code` and, instead of discarding everything, commits the
  /// outputs marked keepOnFailure() (the planner's JSON report, which
  /// states the smallest reachable arena).
  void setFailureExitCode(int code) { failureExitCode_ = code; }
  /// The code set, or 1 (any other error).
  int failureExitCode() const { return failureExitCode_; }
  /// Marks the staged output `path` to be committed by
  /// commitKeptOnFailure().
  void keepOnFailure(const std::string &path) { keptOnFailure_.push_back(path); }
  /// On a failure with a code set: commits the outputs marked
  /// keepOnFailure() and discards the rest. "" or the first error.
  std::string commitKeptOnFailure();
  /// Whether nothing is staged.
  bool empty() const { return staged_.empty(); }

private:
  struct Named {
    std::string path, role;
  };
  /// "" or the error when `path` is the same file as an input, a staged
  /// output or (unless `takeClaim`, which then drops it) a claim.
  std::string checkDistinct(const std::string &path, const std::string &role,
                            bool takeClaim);

  std::vector<std::pair<std::string, std::string>> staged_; // (tmp, dest)
  std::vector<std::string> stagedRoles_;
  std::vector<Named> inputs_, claims_;
  std::vector<std::string> keptOnFailure_;
  int failureExitCode_ = 1;
  bool deferred_ = false;
};

/// The tools' exit codes (docs/design.md, "Exit codes"): 0 success, 1 an
/// error (the message says which), 3 no plan fits the budget (offload-opt
/// --offload-plan-memory; its report=json:FILE, written all the same,
/// states the smallest reachable arena).
constexpr int kExitNoPlanFits = 3;

/// Unlinks every temporary any OutputFiles has staged and not yet committed
/// or discarded. Async-signal-safe (no allocation, no locks): for crash and
/// fatal-error handlers.
void removeStagedTemporaries();

/// Whether two paths name the same file: the same device and inode when both
/// exist, else the same path once each one's directory is resolved.
bool sameFile(const std::string &a, const std::string &b);

} // namespace offload

#endif
