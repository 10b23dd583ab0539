//===- TargetFileTest.cpp - The host target file, runtime to compiler ------===//
//
// Part of offload (issue 31). The host target is measured on the runtime
// side (offload-run --calibrate, Calibration.h) and read by the compiler
// (parseTargetFile, Target.h): the two sides share only the JSON keys. Every
// figure the runtime writes must arrive in the TargetSpec unchanged (doubles
// to the last bit), and target=host must look where Target.h says.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/Analysis/Target.h"
#include "offload/Runtime/Calibration.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace mlir::offload;
namespace rt = offload::rt;

namespace {
std::string tempPath(const char *name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/offload-target-file-test-" +
         std::to_string(getpid()) + "-" + name;
}

std::string writeFile(const char *name, const std::string &text) {
  std::string path = tempPath(name);
  std::ofstream(path) << text;
  return path;
}

/// Figures no calibration would give, each distinct and with many digits.
rt::HostCalibration sample() {
  rt::HostCalibration c;
  c.threads = 3;
  c.copyBytesPerSecond = 1.2345678901234567e10;
  c.memoryBytesPerSecond = 2 * c.copyBytesPerSecond;
  c.flopsPerSecond = 9.87654321e10 / 3;
  c.convFlopsPerSecond = 5e10;
  c.gemmEfficiency = 1;
  c.convEfficiency = 0.1 + 0.2; // not exactly 0.3
  c.otherFlopsEfficiency = 0.1;
  c.memoryEfficiency = 0.75;
  c.hostUpdateBytesPerSecond = 3.3e10 / 7;
  c.opFlopsPerSecond["offload.conv2d_backward_input"] = 4.4e10;
  c.opBytesPerSecond["offload.softmax"] = 1.0 / 3 * 1e10;
  c.opBytesPerSecond["offload.add"] = 3e10;
  c.sizedFlopsPerSecond["offload.matmul"] = {{4096, 4.4e10}, {2097152, 9.3e10 / 7}};
  c.sizedBytesPerSecond["offload.sgd_update"] = {{5242896, 4.05e10}, {83886096, 3.9e10}};
  c.copyLatencySeconds = 3.3619998733185229e-05;
  c.handoffSeconds = 9.4e-6;
  c.sleepOvershootSeconds = 1.47e-5;
  return c;
}
} // namespace

TEST(TargetFileTest, EveryCalibratedFigureReachesTheCompiler) {
  rt::HostCalibration c = sample();
  std::string path =
      writeFile("host.json", rt::hostTargetFileJson(c, "calibrated \"here\" \\ on\ta test"));
  std::string error;
  mlir::FailureOr<TargetSpec> spec = parseTargetFile(path, error, /*allowBase=*/false);
  std::remove(path.c_str());
  ASSERT_TRUE(mlir::succeeded(spec)) << error;
  EXPECT_EQ(spec->name, "host");
  EXPECT_EQ(spec->source.rfind("calibrated \"here\" \\ on\ta test: GEMM 32 GFLOP/s", 0), 0u)
      << spec->source;
  EXPECT_EQ(spec->calibrationThreads, 3);
  EXPECT_EQ(spec->memoryBytes, 0);
  EXPECT_EQ(spec->memoryBytesPerSecond, c.memoryBytesPerSecond);
  EXPECT_EQ(spec->flopsPerSecond, c.flopsPerSecond);
  EXPECT_EQ(spec->hostToDeviceBytesPerSecond, c.copyBytesPerSecond);
  EXPECT_EQ(spec->deviceToHostBytesPerSecond, c.copyBytesPerSecond);
  EXPECT_EQ(spec->hostUpdateBytesPerSecond, c.hostUpdateBytesPerSecond);
  EXPECT_EQ(spec->gemmEfficiency, c.gemmEfficiency);
  EXPECT_EQ(spec->convEfficiency, c.convEfficiency);
  EXPECT_EQ(spec->otherFlopsEfficiency, c.otherFlopsEfficiency);
  EXPECT_EQ(spec->memoryEfficiency, c.memoryEfficiency);
  EXPECT_EQ(spec->copyLatencySeconds, c.copyLatencySeconds);
  EXPECT_EQ(spec->opFlopsPerSecond, c.opFlopsPerSecond);
  EXPECT_EQ(spec->opBytesPerSecond, c.opBytesPerSecond);
  EXPECT_EQ(spec->sizedFlopsPerSecond, c.sizedFlopsPerSecond);
  EXPECT_EQ(spec->sizedBytesPerSecond, c.sizedBytesPerSecond);
  EXPECT_EQ(spec->workspaceBytes, 0);
}

TEST(TargetFileTest, HostTargetPathFollowsTheDocumentedOrder) {
  std::string error;
  setenv("OFFLOAD_HOST_TARGET", "/x/mine.json", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(hostTargetPath(error).value_or(""), "/x/mine.json");
  setenv("OFFLOAD_HOST_TARGET", "", 1);
  EXPECT_EQ(hostTargetPath(error).value_or(""), "/xdg/offload/host-target.json");
  unsetenv("OFFLOAD_HOST_TARGET");
  setenv("XDG_CACHE_HOME", "relative/cache", 1);
  EXPECT_EQ(hostTargetPath(error).value_or(""), "/home/u/.cache/offload/host-target.json");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(hostTargetPath(error).value_or(""), "/home/u/.cache/offload/host-target.json");
  unsetenv("HOME");
  EXPECT_TRUE(mlir::failed(hostTargetPath(error)));
  EXPECT_NE(error.find("offload-run --calibrate"), std::string::npos) << error;
}

TEST(TargetFileTest, TargetHostNamesTheCommandWhenTheFileIsMissing) {
  std::string missing = tempPath("missing.json");
  setenv("OFFLOAD_HOST_TARGET", missing.c_str(), 1);
  std::string error;
  EXPECT_TRUE(mlir::failed(resolveTarget("host", error)));
  EXPECT_NE(error.find("does not exist; measure this machine with `offload-run --calibrate " +
                      missing + "`"),
            std::string::npos)
      << error;
  // The same file, written by the runtime: the same figures on every read.
  std::string path = writeFile("host2.json", rt::hostTargetFileJson(sample(), "test"));
  setenv("OFFLOAD_HOST_TARGET", path.c_str(), 1);
  mlir::FailureOr<TargetSpec> a = resolveTarget("host", error);
  mlir::FailureOr<TargetSpec> b = resolveTarget("host", error);
  std::remove(path.c_str());
  unsetenv("OFFLOAD_HOST_TARGET");
  ASSERT_TRUE(mlir::succeeded(a) && mlir::succeeded(b)) << error;
  EXPECT_EQ(a->source, b->source);
  EXPECT_EQ(a->sizedFlopsPerSecond, b->sizedFlopsPerSecond);
}
