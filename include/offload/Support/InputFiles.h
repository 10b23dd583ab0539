//===- InputFiles.h - Input files opened only when they are regular files -*- C++ -*-===//
//
// Part of offload. The one way the tools open a file a user names as input
// (a model, a plan, a target or decisions file, an .npz):
//
//   * the path is opened without blocking (O_NONBLOCK), so a FIFO with no
//     writer does not hang in open(); then fstat() decides: anything but a
//     regular file (a FIFO, a character device such as /dev/zero -- also
//     through a symbolic link --, a directory, a socket) is refused by name;
//   * a read is bounded by the size fstat() reported, and by a limit the
//     caller states (with how to raise it), checked before anything is read.
//
// Standard C++ and POSIX only: the runtime's tool uses it without MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_SUPPORT_INPUTFILES_H
#define OFFLOAD_SUPPORT_INPUTFILES_H

#include <cstdint>
#include <string>

namespace offload {

/// "a FIFO", "a character device", "a directory", ... for a st_mode.
const char *fileKindName(unsigned mode);

/// Opens `path` for reading when it is a regular file: "" and `fd` (blocking
/// again, close-on-exec) and `size` set, or an error naming `what` and the
/// path ("plan file '/dev/zero' is a character device, not a regular file").
std::string openRegularFile(const std::string &path, const std::string &what,
                            int &fd, uint64_t &size);

/// Whether `path` can be opened as a regular file (openRegularFile, closed
/// again): "" or the error.
std::string checkInputFile(const std::string &path, const std::string &what);

/// Reads the whole regular file `path` into `out`. A file larger than
/// `limit` bytes is refused before it is read, with `raiseHint` (how to raise
/// the limit) in the error. The read stops at the size fstat() reported.
std::string readInputFile(const std::string &path, const std::string &what,
                          uint64_t limit, const std::string &raiseHint,
                          std::string &out);

/// A byte limit from the environment variable `var` (a decimal integer >=
/// 1), else `fallback`. "" or an error naming the variable in `error`.
uint64_t limitFromEnv(const char *var, uint64_t fallback, std::string &error);

} // namespace offload

#endif
