#include "k8s/vgpu_provisioner.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/memory_ledger.h"
#include "node/node_schedule.h"
#include "node/policy_file.h"
#include "port/log.h"

namespace gpuslice::k8s {
namespace {

class StoreProvisioner final : public VgpuProvisioner {
 public:
  explicit StoreProvisioner(const std::string& root) : store_(root) {}

  StatusOr<std::string> Provision(const core::VgpuSpec& spec) override {
    bool created = false;
    auto dir = store_.CreateOrJoin(spec, /*spec_is_explicit=*/true, &created);
    if (!dir.ok()) return dir.status();
    const std::string ledger = *dir + "/ledger";
    if (chmod(ledger.c_str(), 0666) != 0) {
      return Status::Error("cannot open " + ledger + " to the container's users: " + strerror(errno));
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
    if (!s.ok()) port::Log(port::LogLevel::kWarn, "device plugin: the node schedule was not applied: %s", s.message().c_str());
  }

  core::VgpuStore store_;
};

}  // namespace

std::unique_ptr<VgpuProvisioner> NewStoreProvisioner(const std::string& state_root) {
  return std::make_unique<StoreProvisioner>(state_root);
}

}  // namespace gpuslice::k8s
