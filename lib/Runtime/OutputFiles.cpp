//===- OutputFiles.cpp - Output files written only when a command succeeds ===//
//
// Part of offload. See include/offload/Support/OutputFiles.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Support/OutputFiles.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace offload;

static const char *kindOf(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

static std::string dirOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string offload::checkOutputPath(const std::string &path) {
  if (path.empty())
    return "empty output path";
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return "'" + path + "' is " + kindOf(st.st_mode) +
             ", not a regular file; refusing to replace it";
    return "";
  }
  if (errno != ENOENT)
    return "cannot write '" + path + "': " + std::strerror(errno);
  std::string dir = dirOf(path);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "cannot write '" + path + "': directory '" + dir +
           "' does not exist";
  return "";
}

OutputFiles::~OutputFiles() { discard(); }

OutputFiles &OutputFiles::process() {
  static OutputFiles files;
  return files;
}

std::string OutputFiles::stage(const std::string &path, std::string &tmp) {
  if (std::string e = checkOutputPath(path); !e.empty())
    return e;
  // A fresh name next to the destination (same file system, so the final
  // rename is atomic): mkstemp creates it, so no other file is clobbered.
  std::string pattern = path + ".tmp-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0)
    return "cannot create a temporary file next to '" + path +
           "': " + std::strerror(errno);
  close(fd);
  tmp = buf.data();
  staged_.emplace_back(tmp, path);
  return "";
}

std::string OutputFiles::write(const std::string &path, const void *bytes,
                               size_t size) {
  std::string tmp;
  if (std::string e = stage(path, tmp); !e.empty())
    return e;
  FILE *f = std::fopen(tmp.c_str(), "wb");
  bool ok = f && std::fwrite(bytes, 1, size, f) == size;
  if (f)
    ok = std::fclose(f) == 0 && ok;
  if (!ok)
    return "error writing '" + path + "': " + std::strerror(errno);
  return deferred_ ? "" : commit();
}

std::string OutputFiles::commit() {
  while (!staged_.empty()) {
    auto [tmp, dest] = staged_.front();
    // Checked again: the destination may have changed since it was staged.
    if (std::string e = checkOutputPath(dest); !e.empty())
      return e;
    // mkstemp made the temporary 0600; give it the usual mode of new files.
    mode_t mask = umask(0);
    umask(mask);
    chmod(tmp.c_str(), 0666 & ~mask);
    if (std::rename(tmp.c_str(), dest.c_str()) != 0)
      return "cannot write '" + dest + "': " + std::strerror(errno);
    staged_.erase(staged_.begin());
  }
  return "";
}

void OutputFiles::discard() {
  for (auto &[tmp, dest] : staged_)
    std::remove(tmp.c_str());
  staged_.clear();
}
