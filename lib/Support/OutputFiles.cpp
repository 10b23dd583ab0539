//===- OutputFiles.cpp - Output files written only when a command succeeds ===//
//
// Part of offload (lib/Support, library OffloadOutputFiles). See
// include/offload/Support/OutputFiles.h.
//
//===----------------------------------------------------------------------===//

#include "offload/Support/OutputFiles.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
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

//===----------------------------------------------------------------------===//
// The temporaries a crash handler removes
//===----------------------------------------------------------------------===//

namespace {
/// Staged temporaries, as C strings a signal handler can unlink. A slot holds
/// a strdup()ed path from stage() to commit()/discard(); more temporaries
/// than slots are simply not removed on a crash.
constexpr size_t kTempSlots = 64;
std::atomic<char *> tempSlots[kTempSlots];

void trackTemporary(const std::string &tmp) {
  char *copy = ::strdup(tmp.c_str());
  if (!copy)
    return;
  for (std::atomic<char *> &slot : tempSlots) {
    char *expected = nullptr;
    if (slot.compare_exchange_strong(expected, copy))
      return;
  }
  std::free(copy);
}

void untrackTemporary(const std::string &tmp) {
  for (std::atomic<char *> &slot : tempSlots) {
    char *p = slot.load();
    if (p && tmp == p && slot.compare_exchange_strong(p, nullptr)) {
      std::free(p);
      return;
    }
  }
}

/// The path with its directory resolved (realpath), so that "x", "./x" and
/// "dir/../x" compare equal; the path itself when the directory does not
/// resolve.
std::string resolvedPath(const std::string &path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf))
    return buf;
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (::realpath(dir.c_str(), buf))
    return std::string(buf) + "/" + base;
  return path;
}
} // namespace

void offload::removeStagedTemporaries() {
  for (std::atomic<char *> &slot : tempSlots)
    if (char *p = slot.load())
      (void)::unlink(p);
}

bool offload::sameFile(const std::string &a, const std::string &b) {
  if (a == b)
    return true;
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return resolvedPath(a) == resolvedPath(b);
}

//===----------------------------------------------------------------------===//
// OutputFiles
//===----------------------------------------------------------------------===//

OutputFiles::~OutputFiles() { discard(); }

OutputFiles &OutputFiles::process() {
  static OutputFiles files;
  return files;
}

static std::string roleText(const std::string &role, const char *fallback) {
  return role.empty() ? fallback : role;
}

std::string OutputFiles::checkDistinct(const std::string &path,
                                       const std::string &role, bool takeClaim) {
  auto clash = [&](const std::string &other, const std::string &otherRole) {
    return "'" + path + "' is both " + roleText(role, "an output") + " and " +
           otherRole + (other == path ? "" : " ('" + other + "')") +
           " of this command; refusing to write it (an output never replaces "
           "an input or another output): give another path";
  };
  for (const Named &in : inputs_)
    if (sameFile(path, in.path))
      return clash(in.path, in.role);
  for (size_t i = 0; i < staged_.size(); ++i)
    if (sameFile(path, staged_[i].second))
      return clash(staged_[i].second, roleText(stagedRoles_[i], "an output"));
  for (size_t i = 0; i < claims_.size(); ++i)
    if (sameFile(path, claims_[i].path)) {
      if (!takeClaim)
        return clash(claims_[i].path, claims_[i].role);
      claims_.erase(claims_.begin() + i);
      break;
    }
  return "";
}

std::string OutputFiles::addInput(const std::string &path,
                                  const std::string &role) {
  if (!deferred_ || path.empty() || path == "-")
    return "";
  for (size_t i = 0; i < staged_.size(); ++i)
    if (sameFile(path, staged_[i].second))
      return "'" + staged_[i].second + "' is both " +
             roleText(stagedRoles_[i], "an output") + " and " + role +
             " of this command; refusing to write it (an output never "
             "replaces an input or another output): give another path";
  for (const Named &c : claims_)
    if (sameFile(path, c.path))
      return "'" + c.path + "' is both " + c.role + " and " + role +
             " of this command; refusing to write it (an output never "
             "replaces an input or another output): give another path";
  inputs_.push_back({path, role});
  return "";
}

std::string OutputFiles::claim(const std::string &path,
                               const std::string &role) {
  if (std::string e = checkOutputPath(path); !e.empty())
    return e;
  if (!deferred_)
    return "";
  if (std::string e = checkDistinct(path, role, /*takeClaim=*/false); !e.empty())
    return e;
  claims_.push_back({path, role});
  return "";
}

std::string OutputFiles::stage(const std::string &path, std::string &tmp,
                               const std::string &role) {
  if (std::string e = checkOutputPath(path); !e.empty())
    return e;
  if (std::string e = checkDistinct(path, role, /*takeClaim=*/true); !e.empty())
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
  stagedRoles_.push_back(role);
  trackTemporary(tmp);
  return "";
}

std::string OutputFiles::write(const std::string &path, const void *bytes,
                               size_t size, const std::string &role) {
  std::string tmp;
  if (std::string e = stage(path, tmp, role); !e.empty())
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
    untrackTemporary(tmp);
    staged_.erase(staged_.begin());
    stagedRoles_.erase(stagedRoles_.begin());
  }
  if (deferred_) {
    inputs_.clear();
    claims_.clear();
  }
  return "";
}

std::string OutputFiles::commitKeptOnFailure() {
  std::string error;
  std::vector<std::pair<std::string, std::string>> kept;
  std::vector<std::string> keptRoles;
  for (size_t i = 0; i < staged_.size(); ++i)
    if (std::find(keptOnFailure_.begin(), keptOnFailure_.end(), staged_[i].second) !=
        keptOnFailure_.end()) {
      kept.push_back(staged_[i]);
      keptRoles.push_back(stagedRoles_[i]);
    } else {
      std::remove(staged_[i].first.c_str());
      untrackTemporary(staged_[i].first);
    }
  staged_ = std::move(kept);
  stagedRoles_ = std::move(keptRoles);
  keptOnFailure_.clear();
  error = commit();
  discard();
  return error;
}

void OutputFiles::discard() {
  for (auto &[tmp, dest] : staged_) {
    std::remove(tmp.c_str());
    untrackTemporary(tmp);
  }
  staged_.clear();
  stagedRoles_.clear();
  inputs_.clear();
  claims_.clear();
}
