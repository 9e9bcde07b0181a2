#include "daemon/daemon_client.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <chrono>

#include "port/fd_passing.h"

namespace gpuslice::daemon {
namespace {

namespace pb = control::v1;

}  // namespace

std::unique_ptr<DaemonClient> DaemonClient::ConnectIfRunning(const std::string& socket_path) {
  struct stat st;
  if (stat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return nullptr;
  // A refused connect means a stale socket (its daemon died): no daemon.
  // A socket that accepts belongs to a live daemon, which gRPC then uses.
  if (!port::UnixSocketAnswers(socket_path)) return nullptr;
  grpc::ChannelArguments args;
  // One short-lived connection per command: no need for gRPC's retries.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto channel = grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
  return std::unique_ptr<DaemonClient>(new DaemonClient(socket_path, pb::Control::NewStub(channel)));
}

StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Connect(const std::string& socket_path) {
  auto client = ConnectIfRunning(socket_path);
  if (client == nullptr) {
    return Status::Error("no gpuslice daemon answers on " + socket_path +
                         "; start one (gpuslice daemon, or systemctl start gpuslice), or point GPUSLICE_SOCKET "
                         "at its socket");
  }
  return client;
}

template <typename Response, typename Call>
StatusOr<Response> DaemonClient::Invoke(Call call, std::chrono::seconds deadline) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  Response response;
  const grpc::Status s = call(&context, &response);
  unanswered_ =
      s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (s.ok()) return response;
  if (unanswered_) {
    return Status::Error("the gpuslice daemon on " + socket_path_ + " did not answer (" + s.error_message() +
                         "); check it with systemctl status gpuslice");
  }
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return Status::Error("the gpuslice daemon on " + socket_path_ +
                         " is an older version without this call; upgrade and restart it");
  }
  return Status::Error(s.error_message());
}

StatusOr<pb::GetStatusResponse> DaemonClient::GetStatus() {
  return Invoke<pb::GetStatusResponse>(
      [&](grpc::ClientContext* c, pb::GetStatusResponse* r) { return stub_->GetStatus(c, pb::GetStatusRequest(), r); });
}

StatusOr<pb::GetDevicesResponse> DaemonClient::GetDevices() {
  return Invoke<pb::GetDevicesResponse>([&](grpc::ClientContext* c, pb::GetDevicesResponse* r) {
    return stub_->GetDevices(c, pb::GetDevicesRequest(), r);
  });
}

StatusOr<pb::CreateVgpuResponse> DaemonClient::CreateVgpu(const pb::CreateVgpuRequest& request,
                                                          std::chrono::seconds deadline) {
  return Invoke<pb::CreateVgpuResponse>(
      [&](grpc::ClientContext* c, pb::CreateVgpuResponse* r) { return stub_->CreateVgpu(c, request, r); }, deadline);
}

StatusOr<pb::ListVgpusResponse> DaemonClient::ListVgpus(const pb::ListVgpusRequest& request) {
  return Invoke<pb::ListVgpusResponse>(
      [&](grpc::ClientContext* c, pb::ListVgpusResponse* r) { return stub_->ListVgpus(c, request, r); });
}

StatusOr<pb::ResizeVgpuResponse> DaemonClient::ResizeVgpu(const pb::ResizeVgpuRequest& request) {
  return Invoke<pb::ResizeVgpuResponse>(
      [&](grpc::ClientContext* c, pb::ResizeVgpuResponse* r) { return stub_->ResizeVgpu(c, request, r); });
}

StatusOr<pb::DeleteVgpuResponse> DaemonClient::DeleteVgpu(const pb::DeleteVgpuRequest& request) {
  return Invoke<pb::DeleteVgpuResponse>(
      [&](grpc::ClientContext* c, pb::DeleteVgpuResponse* r) { return stub_->DeleteVgpu(c, request, r); });
}

StatusOr<pb::SuspendVgpuResponse> DaemonClient::SuspendVgpu(const pb::SuspendVgpuRequest& request) {
  return Invoke<pb::SuspendVgpuResponse>(
      [&](grpc::ClientContext* c, pb::SuspendVgpuResponse* r) { return stub_->SuspendVgpu(c, request, r); },
      std::chrono::minutes(10));
}

StatusOr<pb::ResumeVgpuResponse> DaemonClient::ResumeVgpu(const pb::ResumeVgpuRequest& request) {
  return Invoke<pb::ResumeVgpuResponse>(
      [&](grpc::ClientContext* c, pb::ResumeVgpuResponse* r) { return stub_->ResumeVgpu(c, request, r); },
      std::chrono::minutes(10));
}

StatusOr<pb::MigrateVgpuResponse> DaemonClient::MigrateVgpu(const pb::MigrateVgpuRequest& request) {
  return Invoke<pb::MigrateVgpuResponse>(
      [&](grpc::ClientContext* c, pb::MigrateVgpuResponse* r) { return stub_->MigrateVgpu(c, request, r); },
      std::chrono::minutes(20));
}

StatusOr<pb::ClearGpuHealthResponse> DaemonClient::ClearGpuHealth(const pb::ClearGpuHealthRequest& request) {
  return Invoke<pb::ClearGpuHealthResponse>(
      [&](grpc::ClientContext* c, pb::ClearGpuHealthResponse* r) { return stub_->ClearGpuHealth(c, request, r); });
}

}  // namespace gpuslice::daemon
