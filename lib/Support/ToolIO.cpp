//===- ToolIO.cpp - A compiler tool's input file and -o stream ------------===//
//
// Part of offload. See include/offload/Support/ToolIO.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Support/ToolIO.h"
#include "offload/Support/InputFiles.h"

#include "llvm/Support/FileSystem.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace offload;

std::string offload::readToolInput(const std::string &path, OutputFiles &outputs,
                                   std::unique_ptr<llvm::MemoryBuffer> &input) {
  if (path == "-") {
    auto buffer = llvm::MemoryBuffer::getSTDIN();
    if (!buffer)
      return "cannot read stdin: " + buffer.getError().message();
    input = std::move(*buffer);
    return "";
  }
  int fd;
  uint64_t size;
  if (std::string e = openRegularFile(path, "input file", fd, size); !e.empty())
    return e;
  auto buffer =
      llvm::MemoryBuffer::getOpenFile(llvm::sys::fs::convertFDToNativeFile(fd), path, size);
  ::close(fd);
  if (!buffer)
    return "cannot read input file '" + path + "': " + buffer.getError().message();
  input = std::move(*buffer);
  return outputs.addInput(path, "the input");
}

/// Opens `path` in place when it exists and is a character device or a FIFO
/// (a FIFO without a reader is an error, not a wait): the descriptor, or -1
/// with `error` set, or -1 without it when `path` is to be staged (a regular
/// file, or none yet).
static int openStreamOutput(const std::string &path, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode))
    return -1;
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    error = checkOutputPath(path);
    return -1;
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    error = "cannot write '" + path + "': " +
            (errno == ENXIO ? std::string("a FIFO that nobody reads")
                            : std::string(std::strerror(errno)));
    return -1;
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string offload::openToolOutput(const std::string &path, OutputFiles &outputs,
                                    std::unique_ptr<llvm::raw_fd_ostream> &file) {
  if (path == "-")
    return "";
  std::string error;
  int fd = openStreamOutput(path, error);
  if (!error.empty())
    return error;
  if (fd >= 0) {
    file = std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/true);
    return "";
  }
  std::string tmp;
  if (std::string e = outputs.stage(path, tmp, "the output (-o)"); !e.empty())
    return e;
  std::error_code ec;
  file = std::make_unique<llvm::raw_fd_ostream>(tmp, ec);
  if (ec)
    return "cannot write '" + path + "': " + ec.message();
  return "";
}

std::string offload::closeToolOutput(std::unique_ptr<llvm::raw_fd_ostream> &file,
                                     const std::string &path, llvm::StringRef stdoutWhat) {
  if (file) {
    file->close();
    if (file->has_error()) {
      std::string e = "cannot write '" + path + "': " + file->error().message();
      file->clear_error();
      return e;
    }
    return "";
  }
  llvm::outs().flush();
  if (llvm::outs().has_error()) {
    std::string e = "cannot write " + stdoutWhat.str() + " to stdout: " +
                    llvm::outs().error().message();
    llvm::outs().clear_error();
    return e;
  }
  return "";
}
