// `gpuslice suspend NAME` and `gpuslice resume NAME`: every process of a
// vGPU checkpointed to host memory together (its device memory released),
// or restored and running again, through the daemon (node/vgpu_suspender.h
// says what is atomic and what each failure leaves); and `gpuslice migrate
// NAME --gpu N`, the same checkpoint restored onto another GPU. The daemon
// alone suspends: it owns the state that a restart must recover, so without
// a daemon these commands say how to start one.
#include <iostream>
#include <memory>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "core/byte_size.h"
#include "daemon/daemon_client.h"
#include "daemon/socket_path.h"

namespace gpuslice::cli {
namespace {

namespace pb = control::v1;

struct SuspendOptions {
  std::string name;
  std::string gpu;  // migrate's target
  uint32_t lock_timeout_ms = 0;
  bool json = false;
  std::string state_dir;
  std::string socket;
};

enum class Verb { kSuspend, kResume, kMigrate };

// Suspend, resume and migrate differ only in the request sent and the
// sentence printed: one function, told which.
int RunSuspend(const SuspendOptions& o, Verb verb) {
  const std::string socket = o.socket.empty() ? daemon::DefaultSocketPath(o.state_dir) : o.socket;
  auto client = daemon::DaemonClient::Connect(socket);
  if (!client.ok()) return Fail(client.status().message());
  // Both responses carry the vGPU after the change.
  const auto vgpu_of = [](const auto& response) -> StatusOr<pb::Vgpu> {
    if (!response.ok()) return response.status();
    return response->vgpu();
  };
  StatusOr<pb::Vgpu> after = Status::Error("");
  if (verb == Verb::kResume) {
    pb::ResumeVgpuRequest request;
    request.set_name(o.name);
    after = vgpu_of(client.value()->ResumeVgpu(request));
  } else if (verb == Verb::kMigrate) {
    pb::MigrateVgpuRequest request;
    request.set_name(o.name);
    request.set_gpu(o.gpu);
    request.set_lock_timeout_ms(o.lock_timeout_ms);
    after = vgpu_of(client.value()->MigrateVgpu(request));
  } else {
    pb::SuspendVgpuRequest request;
    request.set_name(o.name);
    request.set_lock_timeout_ms(o.lock_timeout_ms);
    after = vgpu_of(client.value()->SuspendVgpu(request));
  }
  if (!after.ok()) return Fail(after.status().message());
  const pb::Vgpu& v = after.value();
  if (o.json) {
    std::cout << VgpuJson(v).dump() << "\n";
    return 0;
  }
  const std::string processes = std::to_string(v.processes_size()) + " process(es)";
  std::cout << "vGPU '" << v.name() << "': ";
  if (verb == Verb::kSuspend) {
    std::cout << "suspended, " << processes << ", " << core::FormatByteSize(v.suspended_bytes())
              << " checkpointed to host memory in " << v.last_suspend_seconds() << " s\n";
  } else if (verb == Verb::kResume) {
    std::cout << "resumed, " << processes << " running (restored in " << v.last_resume_seconds() << " s)\n";
  } else {
    const std::string gpu = v.devices_size() == 1 && v.devices(0).has_gpu_index()
                                ? std::to_string(v.devices(0).gpu_index())
                            : v.devices_size() == 1 ? v.devices(0).gpu_uuid()
                                                    : "?";
    std::cout << "migrated to GPU " << gpu << ", " << processes << " running (checkpointed in "
              << v.last_suspend_seconds() << " s, restored in " << v.last_resume_seconds()
              << " s). Their memory limit moved with them; their compute share and priority apply again once "
                 "they restart\n";
  }
  return 0;
}

void AddOne(CLI::App& app, Verb verb) {
  auto o = std::make_shared<SuspendOptions>();
  CLI::App* cmd =
      verb == Verb::kResume    ? app.add_subcommand("resume", "Restore and run again every process of a suspended vGPU")
      : verb == Verb::kMigrate ? app.add_subcommand("migrate",
                                                    "Move a one-GPU vGPU's processes to another GPU of the same "
                                                    "model by checkpoint and restore (needs the daemon)")
                               : app.add_subcommand("suspend",
                                                    "Checkpoint every process of a vGPU to host memory together, "
                                                    "releasing its device memory (needs the daemon)");
  cmd->add_option("name", o->name, "The vGPU")->required();
  if (verb == Verb::kMigrate) cmd->add_option("--gpu", o->gpu, "The GPU to move to, by index or UUID")->required();
  if (verb != Verb::kResume) {
    cmd->add_option("--lock-timeout", o->lock_timeout_ms,
                    "Milliseconds to wait for each process's CUDA calls in flight (default: the daemon's, 10000); "
                    "on timeout nothing is suspended");
  }
  cmd->add_flag("--json", o->json, "Print the vGPU after the change as JSON");
  cmd->add_option("--state-dir", o->state_dir, "State directory (default: as for run)");
  cmd->add_option("--socket", o->socket, "The daemon's socket (default: $GPUSLICE_SOCKET, <state-dir>/gpuslice.sock)");
  cmd->callback([o, verb] { ExitCode() = RunSuspend(*o, verb); });
}

}  // namespace

void AddSuspendCommands(CLI::App& app) {
  AddOne(app, Verb::kSuspend);
  AddOne(app, Verb::kResume);
  AddOne(app, Verb::kMigrate);
}

}  // namespace gpuslice::cli
