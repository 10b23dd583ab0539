//===- OpSignatureTest.cpp - Plans checked against the op-signature table -===//
//
// Part of offload. Plan::fromData refuses an instruction of the offload
// dialect that does not match the table generated from the ODS
// (OpSignatures.h), naming the instruction index and the op; it fills in the
// ODS defaults of attributes the instruction leaves out.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/OpSignatures.h"
#include "offload/Runtime/Plan.h"

#include <gtest/gtest.h>

using namespace offload::rt;

namespace {

/// A plan of one instruction `op` reading x (and w when nIn == 2) and
/// writing y, all f32[4].
Expected<std::shared_ptr<const Plan>> onePlan(const std::string &op,
                                              std::vector<int32_t> ins,
                                              int nOut, AttrMap attrs) {
  PlanBuilder b;
  int x = b.buffer("x", DType::F32, {4}, BufferRole::Input);
  int w = b.buffer("w", DType::F32, {4}, BufferRole::Input);
  b.bindIn("x", x);
  b.bindIn("w", w);
  std::vector<int32_t> outs;
  for (int i = 0; i < nOut; ++i) {
    int y = b.buffer("y" + std::to_string(i), DType::F32, {4},
                     BufferRole::Output);
    b.bindOut("y" + std::to_string(i), y);
    outs.push_back(y);
  }
  for (int32_t &i : ins)
    i = i == 0 ? x : i == 1 ? w : i;
  b.instr(op, ins, outs, std::move(attrs));
  return Plan::fromData(b.finish());
}

void expectRefused(const Expected<std::shared_ptr<const Plan>> &p,
                   const std::string &what) {
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find(what), std::string::npos) << p.message();
}

TEST(OpSignatureTest, TableComesFromTheODS) {
  const OpSignature *lin = findOpSignature("offload.linear");
  ASSERT_NE(lin, nullptr);
  EXPECT_EQ(lin->minInputs, 2); // bias is Optional<>
  EXPECT_EQ(lin->maxInputs, 3);
  EXPECT_EQ(lin->numOutputs, 1);
  const OpSignature *cat = findOpSignature("offload.cat");
  ASSERT_NE(cat, nullptr);
  EXPECT_EQ(cat->maxInputs, -1); // Variadic<>
  const OpSignature *ce = findOpSignature("offload.cross_entropy");
  ASSERT_NE(ce, nullptr);
  const OpAttrSignature *red = ce->findAttr("reduction");
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(red->kind, OpAttrKind::Enum);
  EXPECT_EQ(red->presence, OpAttrPresence::Defaulted);
  EXPECT_EQ(red->defaultValue().str, "mean");
  EXPECT_EQ(red->cases(), (std::vector<std::string>{"mean", "sum"}));
  EXPECT_EQ(ce->findAttr("ignore_index")->defaultValue().ints,
            std::vector<int64_t>{-100});
  EXPECT_EQ(findOpSignature("offload.reduce_sum")->findAttr("dims")->defaultValue().ints,
            std::vector<int64_t>{});
  // Not kernel ops: structure the lowering resolves itself.
  for (const char *op : {"offload.save", "offload.restore", "offload.phase",
                         "offload.constant", "offload.to_host",
                         "offload.recompute"})
    EXPECT_EQ(findOpSignature(op), nullptr) << op;
  // Sorted by name.
  const auto &all = opSignatures();
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LT(std::string(all[i - 1].name), all[i].name);
}

TEST(OpSignatureTest, RefusesUnknownOpOfTheDialect) {
  expectRefused(onePlan("offload.frobnicate", {0}, 1, {}),
                "instruction 0 (offload.frobnicate): unknown op");
  // Other namespaces are extension kernels: loaded, reported by the backend.
  EXPECT_TRUE(onePlan("ext.frobnicate", {0}, 1, {}).ok());
}

TEST(OpSignatureTest, RefusesWrongArity) {
  expectRefused(onePlan("offload.relu", {0, 1}, 1, {}),
                "instruction 0: offload.relu: has 2 operands, expected 1");
  expectRefused(onePlan("offload.linear", {0}, 1, {}),
                "offload.linear: has 1 operands, expected 2 to 3");
  expectRefused(onePlan("offload.relu", {0}, 2, {}),
                "offload.relu: has 2 results, expected 1");
}

TEST(OpSignatureTest, RefusesMissingUnknownAndMistypedAttributes) {
  expectRefused(onePlan("offload.softmax", {0}, 1, {}),
                "offload.softmax: missing attribute 'dim'");
  AttrMap extra;
  extra.set("dim", attrInt(0));
  extra.set("dimension", attrInt(0));
  expectRefused(onePlan("offload.softmax", {0}, 1, extra),
                "unknown attribute 'dimension' (the op has 'dim')");
  AttrMap wrongKind;
  wrongKind.set("dim", attrFloat(0.5));
  expectRefused(onePlan("offload.softmax", {0}, 1, wrongKind),
                "attribute 'dim' must be an integer");
  AttrMap badEnum;
  badEnum.set("approximate", attrString("erf"));
  expectRefused(onePlan("offload.gelu", {0}, 1, badEnum),
                "attribute 'approximate' is 'erf', expected one of none,tanh");
  AttrMap badBool;
  badBool.set("keepdim", attrInt(2));
  expectRefused(onePlan("offload.reduce_sum", {0}, 1, badBool),
                "attribute 'keepdim' must be a bool");
}

TEST(OpSignatureTest, FillsDefaultsAtLoad) {
  auto p = onePlan("offload.gelu", {0}, 1, {});
  ASSERT_TRUE(p.ok()) << p.message();
  const AttrMap &a = (*p)->data().instructions[0].attrs;
  EXPECT_EQ(a.getString("approximate", "?"), "none");
  auto r = onePlan("offload.reduce_sum", {0}, 1, {});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE((*r)->data().instructions[0].attrs.has("keepdim"));
  EXPECT_TRUE((*r)->data().instructions[0].attrs.has("dims"));
}

} // namespace
