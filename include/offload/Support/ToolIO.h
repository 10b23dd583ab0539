//===- ToolIO.h - A compiler tool's input file and -o stream -----*- C++ -*-===//
//
// Part of offload. The input and `-o` handling that offload-opt and
// offload-translate share (issue 34): the input is `-` (stdin) or a regular
// file (a FIFO, a device, a directory are refused by name before they are
// opened for good, InputFiles.h) registered as an input so that no output
// replaces it; `-o` is stdout for `-`, written in place when it is a
// character device or a FIFO with a reader (/dev/null, /dev/stdout), and
// otherwise staged and renamed into place on commit (OutputFiles.h); a
// failed write (a full disk, /dev/full) is an error, never LLVM's abort on a
// stream destroyed with an error pending.
//
//===----------------------------------------------------------------------===//

#ifndef OFFLOAD_SUPPORT_TOOLIO_H
#define OFFLOAD_SUPPORT_TOOLIO_H

#include "offload/Support/OutputFiles.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace offload {

/// Reads the tool's input `path` (`-`: stdin) into `input`, registering a
/// file with `outputs` as "the input". Returns "" or the error.
std::string readToolInput(const std::string &path, OutputFiles &outputs,
                          std::unique_ptr<llvm::MemoryBuffer> &input);

/// Opens `-o path`: `file` stays null for `-` (stdout); a character device
/// or a FIFO with a reader is opened in place; a regular or new file is
/// staged in `outputs` as "the output (-o)". Returns "" or the error (a FIFO
/// nobody reads, a directory, a path that clashes with an input or another
/// output).
std::string openToolOutput(const std::string &path, OutputFiles &outputs,
                           std::unique_ptr<llvm::raw_fd_ostream> &file);

/// Closes `file` (flushes stdout when `file` is null) and returns the write
/// error, "" if none. `stdoutWhat` names what went to stdout in the message
/// ("the output", "the plan").
std::string closeToolOutput(std::unique_ptr<llvm::raw_fd_ostream> &file,
                            const std::string &path, llvm::StringRef stdoutWhat);

} // namespace offload

#endif // OFFLOAD_SUPPORT_TOOLIO_H
