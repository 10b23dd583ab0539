//===- FuzzPlan.cpp - libFuzzer target: the plan loader -------------------===//
//
// Part of offload (issue 18). Plan::fromBytes on arbitrary bytes: size
// prefix, identifier, FlatBuffers verification, format version, CRC-32,
// semantic validation, and for a plan that loads, the readable dump and the
// static race check of a host session's creation. Must never crash, hang or
// trip a sanitizer; a refused plan must say why.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Plan.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace offload::rt;
  auto plan = Plan::fromBytes(data, size);
  if (!plan) {
    if (plan.message().empty())
      std::abort(); // a refusal must name its reason
    return 0;
  }
  (void)(*plan)->dump();
  (void)(*plan)->opNames();
  // A plan that loads serializes back to a plan that loads.
  std::vector<uint8_t> again = Plan::serialize((*plan)->data());
  if (!Plan::fromBytes(again.data(), again.size()))
    std::abort();
  return 0;
}
