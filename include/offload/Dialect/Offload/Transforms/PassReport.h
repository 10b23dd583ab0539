//===- PassReport.h - Where a pass's report goes (report=) ------*- C++ -*-===//
//
// Part of offload. Every pass that can say what it did takes one option,
// `report=`, read by PassReport (docs/design.md, "Reports"):
//
//   report=  (empty), false, none, off  no report (the default of every
//                                       transform pass)
//   report=-, true, stderr              to stderr (the default of the
//                                       dedicated report passes)
//   report=FILE                         to FILE, written through the tool's
//                                       OutputFiles (committed only when the
//                                       whole command succeeds, never over a
//                                       non-regular file); ./true names a
//                                       file called "true"
//   report=json:FILE, report=json:-     the pass's JSON form, to FILE or
//                                       stderr, for the passes that have one
//                                       (--offload-plan-memory,
//                                       --offload-memory-report); an error
//                                       on the others
//
// A pass never writes to the IR output stream, so `offload-opt a.mlir
// --offload-recompute | offload-opt ...` works whatever report= says.
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PASSREPORT_H
#define OFFLOAD_DIALECT_OFFLOAD_TRANSFORMS_PASSREPORT_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mlir {
namespace offload {

class PassReport {
public:
  enum class Kind { Off, Stderr, File, Json };

  PassReport() = default;
  /// A copy is closed: passes are cloned (MLIR's clonePass) before they run,
  /// and each clone opens its own report.
  PassReport(const PassReport &) {}
  PassReport &operator=(const PassReport &) = delete;

  /// What `value` (the option's text) asks for, without opening anything.
  static Kind classify(StringRef value);

  /// Opens the report `value` asks for. Fails, with an error at `loc` that
  /// names `passName`, when FILE can not be an output file, or when
  /// `value` asks for JSON (json:FILE) and `hasJson` is false.
  LogicalResult open(StringRef value, StringRef passName, Location loc, bool hasJson = false);
  /// The report is the pass's JSON form (report=json:...): stream() then
  /// collects the text report, and close() writes the object given to
  /// setJson() with that text as its "text" member.
  bool json() const { return json_; }
  /// The JSON form's object (report=json:...; ignored otherwise).
  void setJson(llvm::json::Object object) { jsonObject_ = std::move(object); }

  /// The stream to write the report to, or nullptr when it is off.
  llvm::raw_ostream *stream() const { return json_ ? jsonText_.get() : os_; }
  explicit operator bool() const { return os_ != nullptr; }

  /// Writes FILE (nothing to do for stderr or off). Fails with an error at
  /// `loc` when the file cannot be written.
  LogicalResult close(Location loc);

  /// After close(): a FILE report is committed even when the command fails
  /// with a documented outcome (OutputFiles::setFailureExitCode).
  void keepOnFailure();
  /// open, then `body` (the pass's work, writing to stream()), then close:
  /// a reporting pass's whole runOnOperation. Fails when opening or writing
  /// the report fails (the error is at `loc`); the body signals its own
  /// failures, and its report is written all the same.
  LogicalResult run(StringRef value, StringRef passName, Location loc,
                    llvm::function_ref<void()> body, bool hasJson = false) {
    if (failed(open(value, passName, loc, hasJson)))
      return failure();
    body();
    return close(loc);
  }

private:
  std::string passName_;
  std::string path_;
  std::string text_;
  std::unique_ptr<llvm::raw_string_ostream> buffer_;
  llvm::raw_ostream *os_ = nullptr;
  bool json_ = false;
  std::string jsonTextBuffer_;
  std::unique_ptr<llvm::raw_string_ostream> jsonText_;
  llvm::json::Object jsonObject_;
};

} // namespace offload
} // namespace mlir

#endif
