//===- NpzTest.cpp - .npy/.npz I/O against numpy --------------------------===//
//
// Part of offload. C++ round trip, and interchange with numpy in both
// directions (/usr/bin/python3, or $OFFLOAD_PYTHON); the numpy side checks
// with np.array_equal against the same formulas.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Npz.h"
#include "TestPlans.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace offload::rt;
using namespace offload::rt::test;

namespace {

std::string python() {
  const char *p = std::getenv("OFFLOAD_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

bool haveNumpy() {
  return std::system((python() + " -c 'import numpy' 2>/dev/null").c_str()) ==
         0;
}

int runPython(const std::string &script) {
  std::string path = tempPath("script.py");
  {
    std::ofstream os(path);
    os << script;
  }
  int rc = std::system((python() + " " + path).c_str());
  std::remove(path.c_str());
  return rc;
}

const NamedTensors &sampleArrays() {
  static NamedTensors arrays = [] {
    NamedTensors a;
    std::vector<float> f(12);
    for (int i = 0; i < 12; ++i)
      f[size_t(i)] = 0.5f * float(i) - 3.0f;
    a.emplace_back("fc1.weight", Tensor::fromVector(DType::F32, {3, 4}, f));
    a.emplace_back("d", Tensor::fromVector(DType::F64, {2},
                                           std::vector<double>{1e-300, -2.5}));
    a.emplace_back("idx",
                   Tensor::fromVector(DType::I64, {3},
                                      std::vector<int64_t>{-1, 0, 1LL << 40}));
    a.emplace_back("i32", Tensor::fromVector(DType::I32, {1, 1, 2},
                                             std::vector<int32_t>{7, -7}));
    a.emplace_back("mask", Tensor::fromVector(DType::Bool, {2},
                                              std::vector<uint8_t>{1, 0}));
    a.emplace_back(
        "grad:scalar",
        Tensor::fromVector(DType::F32, {}, std::vector<float>{4.25f}));
    a.emplace_back("empty", Tensor(DType::F32, {0, 3}));
    // 1.5, -2^-24 (the smallest subnormal), 65504 (the largest finite).
    a.emplace_back("half", Tensor::fromVector(DType::F16, {3},
                                              std::vector<uint16_t>{0x3e00, 0x8001, 0x7bff}));
    // bf16 bits, stored as uint16 (Npz.h): 1.0, -2.5, inf.
    a.emplace_back("bf16", Tensor::fromVector(DType::BF16, {3},
                                              std::vector<uint16_t>{0x3f80, 0xc020, 0x7f80}));
    return a;
  }();
  return arrays;
}

const char *kNumpyArrays = R"(
import numpy as np
ref = {
  'fc1.weight': (np.arange(12, dtype=np.float32) * np.float32(0.5) - np.float32(3)).reshape(3, 4),
  'd': np.array([1e-300, -2.5], dtype=np.float64),
  'idx': np.array([-1, 0, 1 << 40], dtype=np.int64),
  'i32': np.array([7, -7], dtype=np.int32).reshape(1, 1, 2),
  'mask': np.array([True, False]),
  'grad:scalar': np.array(4.25, dtype=np.float32),
  'empty': np.zeros((0, 3), dtype=np.float32),
  'half': np.array([1.5, -2.0**-24, 65504], dtype=np.float16),
  'bf16': np.array([0x3f80, 0xc020, 0x7f80], dtype=np.uint16),
}
)";

void expectSample(const NamedTensors &got) {
  const NamedTensors &want = sampleArrays();
  ASSERT_EQ(got.size(), want.size());
  for (const auto &w : want) {
    bool found = false;
    for (const auto &g : got)
      if (g.first == w.first) {
        found = true;
        EXPECT_TRUE(g.second.bitEqual(w.second)) << w.first;
      }
    EXPECT_TRUE(found) << w.first;
  }
}

TEST(NpzTest, RoundTripInCpp) {
  for (bool compress : {false, true}) {
    std::string path = tempPath("rt.npz");
    ASSERT_TRUE(writeNpz(path, sampleArrays(), compress).ok());
    auto got = readNpz(path);
    ASSERT_TRUE(got.ok()) << got.message();
    expectSample(*got);
    std::remove(path.c_str());
  }
}

TEST(NpzTest, ReadWhatNumpyWrote) {
  if (!haveNumpy())
    GTEST_SKIP() << "no numpy at " << python();
  for (const char *fn : {"savez", "savez_compressed"}) {
    std::string path = tempPath(std::string(fn) + ".npz");
    std::string script =
        std::string(kNumpyArrays) + "np." + fn + "('" + path + "', **ref)\n";
    ASSERT_EQ(runPython(script), 0);
    auto got = readNpz(path);
    ASSERT_TRUE(got.ok()) << got.message();
    expectSample(*got);
    std::remove(path.c_str());
  }
}

TEST(NpzTest, NumpyReadsWhatWeWrote) {
  if (!haveNumpy())
    GTEST_SKIP() << "no numpy at " << python();
  for (bool compress : {false, true}) {
    std::string path = tempPath("ours.npz");
    ASSERT_TRUE(writeNpz(path, sampleArrays(), compress).ok());
    std::string script = std::string(kNumpyArrays) + "z = np.load('" + path +
                         "')\n"
                         "assert sorted(z.files) == sorted(ref), z.files\n"
                         "for k, v in ref.items():\n"
                         "  assert z[k].dtype == v.dtype, (k, z[k].dtype)\n"
                         "  assert z[k].shape == v.shape, (k, z[k].shape)\n"
                         "  assert np.array_equal(z[k], v), k\n";
    EXPECT_EQ(runPython(script), 0);
    std::remove(path.c_str());
  }
}

TEST(NpzTest, UnsupportedArraysAreErrors) {
  if (!haveNumpy())
    GTEST_SKIP() << "no numpy at " << python();
  struct Case {
    const char *expr, *msg;
  } cases[] = {
      {"np.asfortranarray(np.ones((2, 3), dtype=np.float32))", "fortran-order"},
      {"np.ones(3, dtype='>f4')", "dtype '>f4' is not supported"},
      {"np.ones(3, dtype=np.uint8)", "dtype '|u1' is not supported"},
      {"np.ones(3, dtype='>u2')", "dtype '>u2' is not supported"},
  };
  for (const Case &c : cases) {
    std::string path = tempPath("bad.npz");
    ASSERT_EQ(runPython("import numpy as np\nnp.savez('" + path +
                        "', a=" + c.expr + ")\n"),
              0);
    auto got = readNpz(path);
    ASSERT_FALSE(got.ok()) << c.expr;
    EXPECT_NE(got.message().find(c.msg), std::string::npos) << got.message();
    std::remove(path.c_str());
  }
}

TEST(NpzTest, CorruptFilesAreErrors) {
  std::string path = tempPath("corrupt.npz");
  {
    std::ofstream os(path, std::ios::binary);
    os << "this is not a zip file";
  }
  auto got = readNpz(path);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("cannot read"), std::string::npos);
  std::remove(path.c_str());
  std::vector<uint8_t> npy = encodeNpy(sampleArrays()[0].second);
  for (size_t keep : {size_t(3), size_t(20), npy.size() - 1}) {
    auto t = parseNpy(npy.data(), keep);
    EXPECT_FALSE(t.ok()) << keep;
  }
}

TEST(NpzTest, StreamedSourcesAreReadInPiecesAndTheirErrorsNamed) {
  // A 3 MiB array pulled through a callback in pieces of at most 1 MiB,
  // consecutive and covering it exactly once.
  const int64_t n = 3 * (1 << 20) / 4 + 5;
  std::vector<uint64_t> pieces;
  NpzSource big;
  big.name = "big";
  big.dtype = DType::F32;
  big.shape = {n};
  uint64_t next = 0;
  big.read = [&](uint64_t off, void *dst, size_t bytes) {
    EXPECT_EQ(off, next);
    EXPECT_LE(bytes, size_t(1) << 20);
    next = off + bytes;
    pieces.push_back(bytes);
    for (size_t k = 0; k < bytes; ++k)
      static_cast<uint8_t *>(dst)[k] = uint8_t((off + k) * 7);
    return Status::success();
  };
  std::string path = tempPath("streamed.npz");
  ASSERT_TRUE(writeNpzSources(path, {big}).ok());
  EXPECT_EQ(next, uint64_t(n) * 4);
  EXPECT_GE(pieces.size(), 3u);
  size_t seen = 0;
  Status st = forEachNpzArray(path, [&](std::string name, Tensor t) {
    ++seen;
    EXPECT_EQ(name, "big");
    EXPECT_TRUE(t.sameTypeAndShape(DType::F32, {n}));
    const uint8_t *b = static_cast<const uint8_t *>(t.data());
    for (size_t k = 0; k < t.byteSize(); k += 4099)
      EXPECT_EQ(b[k], uint8_t(k * 7)) << k;
    return Status::success();
  });
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(seen, 1u);
  // A failing source fails the write with its message and the array name.
  NpzSource bad = npzSource("ok", sampleArrays()[0].second);
  NpzSource broken = big;
  broken.name = "broken";
  broken.read = [](uint64_t, void *, size_t) {
    return Status::error("the device is gone");
  };
  Status w = writeNpzSources(tempPath("broken.npz"), {bad, broken});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("reading array 'broken': the device is gone"),
            std::string::npos)
      << w.message();
  // The callback's error stops the reading and is returned.
  ASSERT_TRUE(writeNpz(path, sampleArrays()).ok());
  size_t calls = 0;
  st = forEachNpzArray(path, [&](std::string, Tensor) {
    ++calls;
    return Status::error("enough");
  });
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(st.message(), "enough");
  std::remove(path.c_str());
}

} // namespace
