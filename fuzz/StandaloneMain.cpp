//===- StandaloneMain.cpp - Run a fuzz target on files, without libFuzzer ===//
//
// Part of offload. Built with the normal compiler (g++ has no libFuzzer):
// runs LLVMFuzzerTestOneInput once per file named on the command line (or
// per file of a directory), so that every build compiles the targets and
// the default test run replays the seed corpus and the saved reproducers.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int runFile(const std::string &path) {
  std::ifstream is(path, std::ios::binary);
  if (!is) {
    std::fprintf(stderr, "cannot read '%s'\n", path.c_str());
    return 1;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(is)),
                             std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; ++i) {
    std::string p = argv[i];
    struct stat st;
    if (stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR *d = opendir(p.c_str());
      for (dirent *e; d && (e = readdir(d));) {
        std::string name = e->d_name;
        if (name == "." || name == "..")
          continue;
        bad += runFile(p + "/" + name);
        ++files;
      }
      if (d)
        closedir(d);
    } else {
      bad += runFile(p);
      ++files;
    }
  }
  std::printf("ran %d inputs\n", files);
  return bad ? 1 : 0;
}
