//===- offload-translate.cpp - Exporters of the offload dialect -----------===//
//
// Part of offload. `offload-translate --offload-to-plan step.mlir -o
// step.plan` writes a training step as the runtime's plan file, as MLIR's
// standalone-translate registers its translations. The IR is read, never
// changed; `--help` lists the translations. Built on mlirTranslateMain.
//
//===----------------------------------------------------------------------===//

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

#include "offload/Conversion/OffloadToPlan.h"

int main(int argc, char **argv) {
  mlir::offload::registerToPlanTranslation();
  return mlir::failed(mlir::mlirTranslateMain(
      argc, argv, "offload exporters: the runtime plan of a training step\n"));
}
