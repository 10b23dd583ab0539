//===- MlpPlanGen.cpp - Write the test MLP plan and its .npz files --------===//
//
// Part of offload's tests. Usage: offload-mlp-plan-gen OUTDIR [N D H C]
// writes OUTDIR/mlp.oflp, OUTDIR/params.npz (parameters and optimizer
// state), OUTDIR/inputs.npz (x, target); see MlpPlan.h. N D H C (batch,
// input features, hidden units, classes; default 8 5 16 4) size the MLP:
// test/Runtime/host_memory_test.py makes one of tens of MB.
//
//===----------------------------------------------------------------------===//

#include "MlpPlan.h"
#include "offload/Runtime/Npz.h"

#include <cstdio>
#include <cstdlib>

using namespace offload::rt;
using namespace offload::rt::test;

int main(int argc, char **argv) {
  if (argc != 2 && argc != 6) {
    std::fprintf(stderr, "usage: offload-mlp-plan-gen OUTDIR [N D H C]\n");
    return 1;
  }
  std::string dir = argv[1];
  MlpDims m;
  if (argc == 6) {
    int64_t *dims[] = {&m.N, &m.D, &m.H, &m.C};
    for (int k = 0; k < 4; ++k) {
      long long v = std::atoll(argv[2 + k]);
      if (v < 1 || v > (1 << 20)) {
        std::fprintf(stderr, "offload-mlp-plan-gen: '%s' is not a dimension "
                             "in [1, 1048576]\n", argv[2 + k]);
        return 1;
      }
      *dims[k] = v;
    }
  }
  // A second plan whose hidden layer is wider: it shares names with the
  // first (fc1.weight, ...) but not their shapes (multi-plan error tests).
  MlpDims wide;
  wide.H = m.H + 1;
  if (Status s = Plan::save(buildMlpPlan(wide), dir + "/mlp-wide.oflp"); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  if (Status s = Plan::save(buildMlpPlan(m), dir + "/mlp.oflp"); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  NamedTensors params, inputs;
  for (auto &kv : mlpValues(m))
    (kv.first == "x" || kv.first == "target" ? inputs : params)
        .emplace_back(kv.first, kv.second);
  Status s1 = writeNpz(dir + "/params.npz", params);
  Status s2 = writeNpz(dir + "/inputs.npz", inputs, /*compress=*/true);
  if (!s1.ok() || !s2.ok()) {
    std::fprintf(stderr, "%s%s\n", s1.message().c_str(), s2.message().c_str());
    return 1;
  }
  return 0;
}
