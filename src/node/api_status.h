// api_status.h — the outcome of a control-API operation: a code that the
// gRPC layer maps to its status code, and a one-line message naming the
// problem and its fix.
//
// The node's logic (VgpuManager) returns these so that it stays free of
// gRPC; daemon/control_service.cc translates, the CLI prints the message. Value type; thread-compatible; an OK
// status does not allocate.
#ifndef GPUSLICE_NODE_API_STATUS_H_
#define GPUSLICE_NODE_API_STATUS_H_

#include <string>
#include <utility>

namespace gpuslice::node {

enum class ApiCode {
  kOk,
  kInvalidArgument,     // the request is malformed: fix the request
  kNotFound,            // no such vGPU
  kAlreadyExists,       // create of an existing vGPU without join
  kFailedPrecondition,  // the vGPU's state refuses the change (in use, over a shrink)
  kPermissionDenied,    // the caller may not change this vGPU (node/vgpu_owner.h)
  kInternal,            // the node's own fault (state directory, driver)
};

class [[nodiscard]] ApiStatus {
 public:
  ApiStatus() = default;
  ApiStatus(ApiCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static ApiStatus Ok() { return ApiStatus(); }

  bool ok() const { return code_ == ApiCode::kOk; }
  ApiCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  ApiCode code_ = ApiCode::kOk;
  std::string message_;
};

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_API_STATUS_H_
