//===- Offload.td - umbrella for the offload dialect ---------*- tablegen -*-===//
#ifndef OFFLOAD_TD
#define OFFLOAD_TD

include "offload/Dialect/Offload/IR/OffloadDialect.td"
include "offload/Dialect/Offload/IR/OffloadTypes.td"
include "offload/Dialect/Offload/IR/OffloadOps.td"
include "offload/Dialect/Offload/IR/OffloadComputeOps.td"

#endif // OFFLOAD_TD
