// control_service.h — the gRPC face of the daemon: proto/gpuslice/control.proto
// translated to and from node::VgpuManager and node::NodeDevices.
//
// Every request is checked here or in the manager before it touches state;
// bad input answers INVALID_ARGUMENT with a message naming the field and the
// fix, never a crash (fuzz/control_api_fuzz.cc drives these methods with
// arbitrary messages). Handlers run on gRPC's threads, concurrently; they
// block on the manager's mutex and on file-system work, and allocate.
#ifndef GPUSLICE_DAEMON_CONTROL_SERVICE_H_
#define GPUSLICE_DAEMON_CONTROL_SERVICE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "daemon/gpu_health.h"
#include "daemon/gpu_usage_meter.h"
#include "gpuslice/control.grpc.pb.h"
#include "node/node_devices.h"
#include "node/vgpu_manager.h"

namespace gpuslice::daemon {

// What GetStatus reports about the daemon itself.
struct DaemonIdentity {
  uint32_t pid = 0;
  std::string version;
  int64_t start_time_unix_seconds = 0;
  std::string state_dir;
  std::string socket_path;
  std::string metrics_address;
};

class ControlService final : public control::v1::Control::Service {
 public:
  // All must outlive the service. `meter` (GPU time, energy, watts in
  // views) and `health` (GPU health in GetDevices) may be null: views then
  // carry no usage and every GPU reports healthy.
  ControlService(node::VgpuManager* manager, const node::NodeDevices* devices, const DaemonIdentity* identity,
                 const GpuUsageMeter* meter = nullptr, GpuHealth* health = nullptr)
      : manager_(manager), devices_(devices), identity_(identity), meter_(meter), health_(health) {}

  // Who makes a call (daemon/control_listener.h): the uid of its peer, or
  // nullopt where that cannot be told, and then nothing is changed. Calls
  // that change a vGPU pass it to the manager, which lets only the vGPU's
  // owner and the operator through (node/vgpu_owner.h); clearing GPU health
  // is the operator's alone. Unset (tests, the fuzzer): every call is the
  // operator's. Set before serving.
  using CallerSource = std::function<std::optional<uid_t>(const grpc::ServerContext&)>;
  void set_caller_source(CallerSource source) { caller_source_ = std::move(source); }

  grpc::Status GetDevices(grpc::ServerContext*, const control::v1::GetDevicesRequest*,
                          control::v1::GetDevicesResponse*) override;
  grpc::Status CreateVgpu(grpc::ServerContext*, const control::v1::CreateVgpuRequest*,
                          control::v1::CreateVgpuResponse*) override;
  grpc::Status ListVgpus(grpc::ServerContext*, const control::v1::ListVgpusRequest*,
                         control::v1::ListVgpusResponse*) override;
  grpc::Status ResizeVgpu(grpc::ServerContext*, const control::v1::ResizeVgpuRequest*,
                          control::v1::ResizeVgpuResponse*) override;
  grpc::Status DeleteVgpu(grpc::ServerContext*, const control::v1::DeleteVgpuRequest*,
                          control::v1::DeleteVgpuResponse*) override;
  grpc::Status SuspendVgpu(grpc::ServerContext*, const control::v1::SuspendVgpuRequest*,
                           control::v1::SuspendVgpuResponse*) override;
  grpc::Status ResumeVgpu(grpc::ServerContext*, const control::v1::ResumeVgpuRequest*,
                          control::v1::ResumeVgpuResponse*) override;
  grpc::Status MigrateVgpu(grpc::ServerContext*, const control::v1::MigrateVgpuRequest*,
                           control::v1::MigrateVgpuResponse*) override;
  grpc::Status GetStatus(grpc::ServerContext*, const control::v1::GetStatusRequest*,
                         control::v1::GetStatusResponse*) override;
  grpc::Status ClearGpuHealth(grpc::ServerContext*, const control::v1::ClearGpuHealthRequest*,
                              control::v1::ClearGpuHealthResponse*) override;

  // Over how much recent measurement views' watts and recent shares are.
  static constexpr uint64_t kUsageWindowUs = 5'000'000;

 private:
  // Adds GPU time, energy, watts and recent shares to `vgpu` (meter_ set).
  void AddUsage(const GpuUsageMeter::Totals& totals, const GpuUsageMeter::Window& window,
                control::v1::Vgpu* vgpu) const;
  void AddHealth(control::v1::GetDevicesResponse* response) const;
  // The caller for the manager into `uid` (nullopt: the operator, where no
  // source is set); PERMISSION_DENIED where the source cannot tell.
  grpc::Status CallerOf(const grpc::ServerContext* context, std::optional<uid_t>* uid) const;
  node::VgpuManager* const manager_;
  const node::NodeDevices* const devices_;
  const DaemonIdentity* const identity_;
  const GpuUsageMeter* const meter_;
  GpuHealth* const health_;
  CallerSource caller_source_;
};

// Exposed for the CLI's standalone views and for tests.
void ToProto(const node::VgpuView& view, control::v1::Vgpu* out);
void ToProto(const node::NodeDevices& devices, control::v1::GetDevicesResponse* out);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_CONTROL_SERVICE_H_
