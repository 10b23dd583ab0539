//===- FuzzNpz.cpp - libFuzzer target: the .npy / .npz readers ------------===//
//
// Part of offload (issue 18). parseNpy on the bytes, and readNpz on the
// bytes written to a file (libzip reads archives from files): headers,
// dtypes, shapes, sizes and zip members of any content must give a tensor
// or an error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Npz.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace offload::rt;
  auto npy = parseNpy(data, size);
  if (!npy && npy.message().empty())
    std::abort();
  static const std::string path =
      "/tmp/offload-fuzz-npz-" + std::to_string(getpid()) + ".npz";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto npz = readNpz(path);
  if (!npz && npz.message().empty())
    std::abort();
  std::remove(path.c_str());
  return 0;
}
