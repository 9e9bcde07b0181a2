#include "k8s/vgpu_provisioner.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/memory_ledger.h"
#include "core/state_handout.h"
#include "node/node_schedule.h"
#include "node/policy_file.h"
#include "port/mutex.h"

namespace gpuslice::k8s {
namespace {

class StoreProvisioner final : public VgpuProvisioner {
 public:
  StoreProvisioner(const std::string& root, std::unique_ptr<node::StateKeeperClient> keeper)
      : store_(root), keeper_(std::move(keeper)) {
    if (keeper_ == nullptr) return;
    keeper_->Adopt();
    store_.set_state_publisher(keeper_.get());
    tender_ = std::thread([this] { TendKeeper(); });
  }

  ~StoreProvisioner() override {
    if (!tender_.joinable()) return;
    {
      port::MutexLock lock(&mu_);
      stopping_ = true;
    }
    wake_.NotifyAll();
    tender_.join();
  }

  StatusOr<std::string> Provision(const core::VgpuSpec& asked) override {
    // The node daemon's overcommit wait, when it serves overcommit on this
    // state directory (node/policy_file.h): read at each call, since the
    // daemon may start after the plugin.
    core::VgpuSpec spec = asked;
    auto wait = node::LoadMemoryWait(store_.root());
    if (!wait.ok()) spdlog::warn("{}", wait.status().message());
    spec.memory_wait_ms = wait.ok() ? wait.value() : 0;
    bool created = false;
    auto dir = store_.CreateOrJoin(spec, /*spec_is_explicit=*/true, &created);
    if (!dir.ok()) return dir.status();
    // The container's processes may run as any uid: they traverse the
    // directory (handed-out state) or write their slot in the ledger file.
    const bool handout = core::HandsOutState(*dir);
    const std::string opened = handout ? *dir : *dir + "/ledger";
    if (chmod(opened.c_str(), handout ? 0755 : 0666) != 0) {
      return Status::Error("cannot open " + opened + " to the container's users: " + strerror(errno));
    }
    Reschedule();
    return dir;
  }

  StatusOr<bool> Release(const std::string& name, const port::ProcessProbe& probe) override {
    const std::string dir = store_.DirOf(name);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return true;
    // VgpuStore judges processes of our own pid namespace only; the
    // container's were judged by `probe` first, so a dead container's slots
    // are free by the time RemoveIfUnused counts them.
    auto handle = core::VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
    if (handle.ok()) {
      core::MemoryLedger ledger(&handle->limits(), &handle->ledger());
      ledger.ReapDeadProcesses(probe);
    }
    auto removed = store_.RemoveIfUnused(name);
    if (removed.ok() && removed.value()) Reschedule();
    return removed;
  }

  std::vector<std::string> List() const override { return store_.List(); }

  StatusOr<task::LevelTable> Levels() const override { return node::LoadLevels(store_.root()); }

 private:
  // A create or a removal changes who shares a GPU: the node schedule (each
  // vGPU's hardware slices, and the roster) is computed again, as the
  // daemon and `gpuslice run` do. A failure costs slices, not limits, so it
  // is said and the allocation stands.
  void Reschedule() {
    auto config = node::LoadPolicyConfig(store_.root());
    const Status s = config.ok() ? node::ApplyNodeSchedule(store_, config.value()) : config.status();
    if (!s.ok()) spdlog::warn("the node schedule was not applied: {}", s.message());
  }

  // A keeper that died (its container restarted, say) is replaced and given
  // every vGPU's memory within a second, so the pods' new processes find
  // their state again (node/state_keeper_client.h, Check).
  void TendKeeper() {
    port::MutexLock lock(&mu_);
    while (!wake_.WaitFor(&mu_, std::chrono::seconds(1), [this] {
      mu_.AssertHeld();
      return stopping_;
    })) {
      lock.Unlock();
      if (Status s = keeper_->Check(); !s.ok()) {
        spdlog::error("state keeper: {}", s.message());
      }
      lock.Lock();
    }
  }

  core::VgpuStore store_;
  const std::unique_ptr<node::StateKeeperClient> keeper_;
  port::Mutex mu_;
  port::CondVar wake_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread tender_;
};

}  // namespace

std::unique_ptr<VgpuProvisioner> NewStoreProvisioner(const std::string& state_root,
                                                     std::unique_ptr<node::StateKeeperClient> keeper) {
  return std::make_unique<StoreProvisioner>(state_root, std::move(keeper));
}

}  // namespace gpuslice::k8s
