// status.h — errors as values, for code shared by the interposer, the CLI and
// the daemon. The interposer links no third-party library (it lives inside
// every CUDA process, next to whatever absl/protobuf the app brings), so this
// is our own small type rather than absl::Status.
//
// A Status is cheap when OK (no allocation). An error carries a one-line,
// user-facing message that names the problem and, where there is one, the fix.
#ifndef GPUSLICE_CORE_STATUS_H_
#define GPUSLICE_CORE_STATUS_H_

#include <optional>
#include <string>
#include <utility>

namespace gpuslice {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace gpuslice

#endif  // GPUSLICE_CORE_STATUS_H_
