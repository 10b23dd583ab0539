//===- PassReport.cpp - Where a pass's report goes (report=) --------------===//
//
// Part of offload. See PassReport.h.
//
//===----------------------------------------------------------------------===//
#include "offload/Dialect/Offload/Transforms/PassReport.h"
#include "offload/Support/OutputFiles.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::offload;

PassReport::Kind PassReport::classify(StringRef value) {
  if (value.starts_with("json:"))
    return Kind::Json;
  return llvm::StringSwitch<Kind>(value)
      .Cases({"", "false", "none", "off"}, Kind::Off)
      .Cases({"-", "true", "stderr"}, Kind::Stderr)
      .Default(Kind::File);
}

LogicalResult PassReport::open(StringRef value, StringRef passName, Location loc,
                               bool hasJson) {
  passName_ = passName.str();
  path_.clear();
  text_.clear();
  buffer_.reset();
  os_ = nullptr;
  json_ = false;
  jsonTextBuffer_.clear();
  jsonText_.reset();
  jsonObject_ = llvm::json::Object();
  switch (classify(value)) {
  case Kind::Off:
    return success();
  case Kind::Stderr:
    os_ = &llvm::errs();
    return success();
  case Kind::Json:
    if (!hasJson)
      return mlir::emitError(loc) << passName_ << ": report=" << value
                                  << ": this pass's report has no JSON form; give report=FILE "
                                     "or report=- for its text";
    json_ = true;
    jsonText_ = std::make_unique<llvm::raw_string_ostream>(jsonTextBuffer_);
    value = value.drop_front(5);
    if (value == "-") {
      os_ = &llvm::errs();
      return success();
    }
    if (value.empty())
      return mlir::emitError(loc) << passName_ << ": report=json: needs a file name (or - for "
                                                  "stderr) after 'json:'";
    break;
  case Kind::File:
    break;
  }
  path_ = value.str();
  // Checked before the pass does any work, so a bad path costs nothing; in
  // a tool, the path is also reserved: the report may not replace -o, the
  // input or another output of the command (OutputFiles.h).
  if (std::string e = ::offload::OutputFiles::process().claim(
          path_, "the report of " + passName_ + " (report=)");
      !e.empty())
    return mlir::emitError(loc) << passName_ << ": the report: " << e;
  buffer_ = std::make_unique<llvm::raw_string_ostream>(text_);
  os_ = buffer_.get();
  return success();
}

void PassReport::keepOnFailure() {
  if (!path_.empty())
    ::offload::OutputFiles::process().keepOnFailure(path_);
}

LogicalResult PassReport::close(Location loc) {
  if (json_ && jsonText_) {
    jsonText_->flush();
    jsonObject_["text"] = jsonTextBuffer_;
    *os_ << llvm::formatv("{0:2}", llvm::json::Value(std::move(jsonObject_))) << "\n";
    jsonObject_ = llvm::json::Object();
    jsonText_.reset();
  }
  if (!buffer_)
    return success();
  buffer_->flush();
  std::string e = ::offload::OutputFiles::process().write(
      path_, text_.data(), text_.size(), "the report of " + passName_ + " (report=)");
  buffer_.reset();
  os_ = nullptr;
  if (!e.empty())
    return mlir::emitError(loc) << passName_ << ": the report: " << e;
  return success();
}
