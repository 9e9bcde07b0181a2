// state_keeper_client.h — the daemon's side of the state keeper
// (state_keeper.h): finds the keeper or starts one, and publishes each new
// vGPU's sealed ledger, and sealed boards for its GPUs, to it.
//
// The daemon gives it to its store (core::VgpuStore::set_state_publisher), so
// every vGPU the daemon makes hands out its state. Boards are made here, one
// per GPU, the first time a vGPU on that GPU is published; the keeper keeps
// the first it is given, so a restarted daemon's new boards are dropped in
// favour of the ones applications already map.
//
// Thread-safe (one mutex; each call is a round trip to the keeper, about
// 100 µs). Allocates and makes syscalls.
#ifndef GPUSLICE_DAEMON_STATE_KEEPER_CLIENT_H_
#define GPUSLICE_DAEMON_STATE_KEEPER_CLIENT_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/state_publisher.h"
#include "core/status.h"

namespace gpuslice::daemon {

class StateKeeperClient : public core::StatePublisher {
 public:
  // Pings the keeper of `root`; if none answers, starts `exe state-keeper`
  // (the gpuslice binary) and waits until it answers (bounded).
  // `group`: the group that may use vGPUs (their sockets get mode 0660).
  static StatusOr<std::unique_ptr<StateKeeperClient>> Connect(const std::string& root, const std::string& exe,
                                                              std::optional<gid_t> group);

  Status Publish(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                 const std::vector<core::GpuUuid>& gpus) override;
  void Withdraw(const std::string& name) override;

  pid_t keeper_pid() const { return keeper_pid_; }

 private:
  StateKeeperClient(std::string root, std::string exe, std::optional<gid_t> group)
      : root_(std::move(root)), exe_(std::move(exe)), group_(group) {}
  // One request, one answer ("ok ..." or "error ...").
  StatusOr<std::string> Ask(const std::string& request, const std::vector<int>& fds);
  Status EnsureKeeperLocked();
  Status SpawnKeeper();
  Status PublishLocked(const std::string& name, const std::string& socket_path, int listen_fd, int ledger_fd,
                       const std::vector<core::GpuUuid>& gpus);

  const std::string root_;
  const std::string exe_;
  const std::optional<gid_t> group_;
  std::mutex mu_;
  pid_t keeper_pid_ = 0;
  std::set<core::GpuUuid> boards_sent_;  // guarded by mu_; reset when a new keeper starts
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_STATE_KEEPER_CLIENT_H_
