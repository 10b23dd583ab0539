//===- InputFiles.cpp - Input files opened only when they are regular files ===//
//
// Part of offload. See include/offload/Support/InputFiles.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Support/InputFiles.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

using namespace offload;

const char *offload::fileKindName(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string offload::openRegularFile(const std::string &path,
                                     const std::string &what, int &fd,
                                     uint64_t &size) {
  fd = -1;
  size = 0;
  std::string named = what + " '" + path + "'";
  if (path.empty())
    return "empty " + what + " path";
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of
  // waiting for one; the fstat below refuses it.
  int f = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f < 0)
    return "cannot open " + named + ": " + std::strerror(errno);
  struct stat st;
  if (::fstat(f, &st) != 0) {
    int e = errno;
    ::close(f);
    return "cannot stat " + named + ": " + std::strerror(e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(f);
    return named + " is " + fileKindName(st.st_mode) +
           ", not a regular file; give a file";
  }
  int flags = ::fcntl(f, F_GETFL);
  if (flags >= 0)
    (void)::fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
  fd = f;
  size = uint64_t(st.st_size);
  return "";
}

std::string offload::checkInputFile(const std::string &path,
                                    const std::string &what) {
  int fd;
  uint64_t size;
  std::string e = openRegularFile(path, what, fd, size);
  if (fd >= 0)
    ::close(fd);
  return e;
}

std::string offload::readInputFile(const std::string &path,
                                   const std::string &what, uint64_t limit,
                                   const std::string &raiseHint,
                                   std::string &out) {
  out.clear();
  int fd;
  uint64_t size;
  if (std::string e = openRegularFile(path, what, fd, size); !e.empty())
    return e;
  if (size > limit) {
    ::close(fd);
    return what + " '" + path + "' has " + std::to_string(size) +
           " bytes, more than the limit of " + std::to_string(limit) +
           " bytes" + (raiseHint.empty() ? "" : " (" + raiseHint + ")");
  }
  try {
    out.resize(size_t(size));
  } catch (const std::bad_alloc &) {
    ::close(fd);
    return "out of memory reading " + what + " '" + path + "' (" +
           std::to_string(size) + " bytes)";
  }
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      out.clear();
      return "cannot read " + what + " '" + path + "': " + std::strerror(e);
    }
    if (n == 0)
      break; // The file shrank while it was read: take what is there.
    got += size_t(n);
  }
  out.resize(got);
  ::close(fd);
  return "";
}

uint64_t offload::limitFromEnv(const char *var, uint64_t fallback,
                               std::string &error) {
  error.clear();
  const char *v = std::getenv(var);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end || errno == ERANGE || n == 0) {
    error = std::string("environment variable ") + var + "='" + v +
            "' is not a byte count (a decimal integer >= 1)";
    return fallback;
  }
  return uint64_t(n);
}
