//===- OpCoverageTest.cpp - Every compute op of the dialect has kernels ---===//
//
// Part of offload. Iterates the operations that the offload dialect
// registers and checks that every one the lowering turns into a kernel
// instruction (all but phase markers, save/restore, recompute regions and
// their yield, copies, waits, constants and the reduction across ranks
// (a runtime op of the communication stream): see
// lib/Conversion/OffloadToPlan/OffloadToPlan.cpp) is in the op-signature
// table generated from the ODS (OpSignatures.h) and has a host kernel and,
// when the runtime is built with CUDA, a CUDA kernel; and that no kernel is
// registered for an op the dialect does not have. The test BackendsLackNoOp
// lists, per backend, the table's ops it lacks. Needs no GPU.
//
//===----------------------------------------------------------------------===//

#include "offload/Dialect/Offload/IR/OffloadDialect.h"
#include "offload/Runtime/OpSignatures.h"
#include "offload/Runtime/Runtime.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "gtest/gtest.h"

#include <set>
#include <string>
#include <vector>

namespace rt = ::offload::rt;

namespace {

/// Dialect ops that never become kernel instructions of a plan.
const std::set<std::string> &nonKernelOps() {
  static const std::set<std::string> s = {
      "offload.phase",   "offload.save",    "offload.restore",
      "offload.recompute", "offload.yield", "offload.to_host",
      "offload.to_device", "offload.wait",  "offload.constant",
      "offload.all_reduce", "offload.reduce_scatter", "offload.all_gather"};
  return s;
}

std::vector<std::string> dialectKernelOps(std::set<std::string> *all) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::offload::OffloadDialect>();
  std::vector<std::string> ops;
  for (mlir::RegisteredOperationName name : ctx.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "offload")
      continue;
    std::string n = name.getStringRef().str();
    if (all)
      all->insert(n);
    if (!nonKernelOps().count(n))
      ops.push_back(n);
  }
  return ops;
}

TEST(OpCoverageTest, HostRegistryCoversEveryComputeOpOfTheDialect) {
  std::set<std::string> all;
  std::vector<std::string> ops = dialectKernelOps(&all);
  for (const std::string &n : nonKernelOps())
    EXPECT_TRUE(all.count(n)) << n << " is no longer a dialect op: update "
                                      "the list of non-kernel ops";
  rt::registerAllHostKernels();
  std::vector<std::string> missing;
  for (const std::string &op : ops)
    if (!rt::KernelRegistry::host().lookup(op))
      missing.push_back(op);
  EXPECT_TRUE(missing.empty())
      << missing.size() << " dialect ops have no host kernel, first "
      << missing.front();
  EXPECT_EQ(ops.size(), 77u);
  // No host kernel for an op the dialect does not have.
  std::set<std::string> opSet(ops.begin(), ops.end());
  for (const std::string &name : rt::KernelRegistry::host().names())
    EXPECT_TRUE(opSet.count(name)) << name << " is not a dialect compute op";
}

TEST(OpCoverageTest, SignatureTableListsExactlyTheKernelOpsOfTheDialect) {
  std::vector<std::string> ops = dialectKernelOps(nullptr);
  std::set<std::string> dialect(ops.begin(), ops.end()), table;
  for (const rt::OpSignature &sig : rt::opSignatures()) {
    table.insert(sig.name);
    EXPECT_TRUE(dialect.count(sig.name))
        << sig.name << " is in the op-signature table but is not a kernel "
                       "op of the dialect";
  }
  for (const std::string &op : ops)
    EXPECT_TRUE(table.count(op))
        << op << " has no entry in the op-signature table (ODS hasKernel)";
}

TEST(OpCoverageTest, BackendsLackNoOp) {
  // Which backend lacks which op of the table, in one message.
  rt::registerAllHostKernels();
  std::vector<std::string> backends{"host"};
  auto cuda = rt::backendOps("cuda");
  std::set<std::string> cudaOps;
  if (cuda.ok()) {
    backends.push_back("cuda");
    cudaOps.insert(cuda->begin(), cuda->end());
  }
  std::string report;
  for (const std::string &b : backends) {
    std::vector<std::string> lacks;
    for (const rt::OpSignature &sig : rt::opSignatures()) {
      bool have = b == "host" ? rt::KernelRegistry::host().lookup(sig.name) != nullptr
                              : cudaOps.count(sig.name) != 0;
      if (!have)
        lacks.push_back(sig.name);
    }
    if (lacks.empty())
      continue;
    report += b + " lacks";
    for (const std::string &op : lacks)
      report += " " + op;
    report += "; ";
  }
  EXPECT_EQ(report, "");
  if (!cuda.ok())
    GTEST_SKIP() << "host checked; " << cuda.message();
}

TEST(OpCoverageTest, CudaBackendCoversEveryComputeOpOfTheDialect) {
  std::vector<std::string> ops = dialectKernelOps(nullptr);
  auto cuda = rt::backendOps("cuda");
  if (!cuda.ok())
    GTEST_SKIP() << cuda.message();
  std::set<std::string> have(cuda->begin(), cuda->end());
  std::vector<std::string> missing;
  for (const std::string &op : ops)
    if (!have.count(op))
      missing.push_back(op);
  EXPECT_TRUE(missing.empty())
      << missing.size() << " dialect ops have no CUDA kernel, first "
      << missing.front();
}

} // namespace
