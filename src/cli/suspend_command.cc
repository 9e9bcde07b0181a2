// `gpuslice suspend NAME` and `gpuslice resume NAME`: every process of a
// vGPU checkpointed to host memory together (its device memory released),
// or restored and running again, through the daemon (node/vgpu_suspender.h
// says what is atomic and what each failure leaves). The daemon alone
// suspends: it owns the state that a restart must recover, so without a
// daemon these commands say how to start one.
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
  uint32_t lock_timeout_ms = 0;
  bool json = false;
  std::string state_dir;
  std::string socket;
};

// Suspend and resume differ only in the request sent and the sentence
// printed: one function, told which.
int RunSuspend(const SuspendOptions& o, bool resume) {
  const std::string socket = o.socket.empty() ? daemon::DefaultSocketPath(o.state_dir) : o.socket;
  auto client = daemon::DaemonClient::Connect(socket);
  if (!client.ok()) return Fail(client.status().message());
  // Both responses carry the vGPU after the change.
  const auto vgpu_of = [](const auto& response) -> StatusOr<pb::Vgpu> {
    if (!response.ok()) return response.status();
    return response->vgpu();
  };
  StatusOr<pb::Vgpu> after = Status::Error("");
  if (resume) {
    pb::ResumeVgpuRequest request;
    request.set_name(o.name);
    after = vgpu_of(client.value()->ResumeVgpu(request));
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
  std::cout << "vGPU '" << v.name() << "': "
            << (resume ? "resumed, " + processes + " running (restored in " + std::to_string(v.last_resume_seconds()) +
                             " s)"
                       : "suspended, " + processes + ", " + core::FormatByteSize(v.suspended_bytes()) +
                             " checkpointed to host memory in " + std::to_string(v.last_suspend_seconds()) + " s")
            << "\n";
  return 0;
}

void AddOne(CLI::App& app, bool resume) {
  auto o = std::make_shared<SuspendOptions>();
  CLI::App* cmd = resume ? app.add_subcommand("resume", "Restore and run again every process of a suspended vGPU")
                         : app.add_subcommand("suspend",
                                              "Checkpoint every process of a vGPU to host memory together, "
                                              "releasing its device memory (needs the daemon)");
  cmd->add_option("name", o->name, "The vGPU")->required();
  if (!resume) {
    cmd->add_option("--lock-timeout", o->lock_timeout_ms,
                    "Milliseconds to wait for each process's CUDA calls in flight (default: the daemon's, 10000); "
                    "on timeout nothing is suspended");
  }
  cmd->add_flag("--json", o->json, "Print the vGPU after the change as JSON");
  cmd->add_option("--state-dir", o->state_dir, "State directory (default: as for run)");
  cmd->add_option("--socket", o->socket, "The daemon's socket (default: $GPUSLICE_SOCKET, <state-dir>/gpuslice.sock)");
  cmd->callback([o, resume] { ExitCode() = RunSuspend(*o, resume); });
}

}  // namespace

void AddSuspendCommands(CLI::App& app) {
  AddOne(app, /*resume=*/false);
  AddOne(app, /*resume=*/true);
}

}  // namespace gpuslice::cli
