// daemon_client.h — the CLI's side of the control API: a gRPC channel to
// the daemon's unix socket, and one call per RPC.
//
// Connecting never waits for a daemon to appear: when nothing answers on
// the socket, ConnectIfRunning() says so at once (no socket file: a stat;
// a stale one: a refused connect), so `gpuslice run` falls back to
// standalone without delay. Errors come back as one-line Status messages:
// the daemon's own (which name the fix), or one naming the socket.
//
// One client per thread; calls block for at most the deadline (10 s).
#ifndef GPUSLICE_DAEMON_DAEMON_CLIENT_H_
#define GPUSLICE_DAEMON_DAEMON_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "gpuslice/control.grpc.pb.h"

namespace gpuslice::daemon {

class DaemonClient {
 public:
  // A client when a daemon answers at `socket_path`, else nullptr.
  static std::unique_ptr<DaemonClient> ConnectIfRunning(const std::string& socket_path);
  // A client, or an error saying no daemon answers and how to start one.
  static StatusOr<std::unique_ptr<DaemonClient>> Connect(const std::string& socket_path);

  StatusOr<control::v1::GetStatusResponse> GetStatus();
  StatusOr<control::v1::GetDevicesResponse> GetDevices();
  StatusOr<control::v1::CreateVgpuResponse> CreateVgpu(const control::v1::CreateVgpuRequest& request,
                                                       std::chrono::seconds deadline = std::chrono::seconds(10));
  StatusOr<control::v1::ListVgpusResponse> ListVgpus(const control::v1::ListVgpusRequest& request);
  StatusOr<control::v1::ResizeVgpuResponse> ResizeVgpu(const control::v1::ResizeVgpuRequest& request);
  StatusOr<control::v1::DeleteVgpuResponse> DeleteVgpu(const control::v1::DeleteVgpuRequest& request);
  // These wait as long as the driver takes (seconds per GiB) and the lock
  // timeout: their deadline is 10 minutes, not 10 s.
  StatusOr<control::v1::SuspendVgpuResponse> SuspendVgpu(const control::v1::SuspendVgpuRequest& request);
  StatusOr<control::v1::ResumeVgpuResponse> ResumeVgpu(const control::v1::ResumeVgpuRequest& request);
  StatusOr<control::v1::MigrateVgpuResponse> MigrateVgpu(const control::v1::MigrateVgpuRequest& request);
  StatusOr<control::v1::ClearGpuHealthResponse> ClearGpuHealth(const control::v1::ClearGpuHealthRequest& request);

  const std::string& socket_path() const { return socket_path_; }
  // Whether the last call failed because nothing answered in time (the
  // daemon restarting, hung, or gone): not an answer, so nothing was done
  // that the caller knows of.
  bool last_call_unanswered() const { return unanswered_; }

 private:
  DaemonClient(std::string socket_path, std::unique_ptr<control::v1::Control::Stub> stub)
      : socket_path_(std::move(socket_path)), stub_(std::move(stub)) {}
  template <typename Response, typename Call>
  StatusOr<Response> Invoke(Call call, std::chrono::seconds deadline = std::chrono::seconds(10));

  std::string socket_path_;
  std::unique_ptr<control::v1::Control::Stub> stub_;
  bool unanswered_ = false;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_DAEMON_CLIENT_H_
