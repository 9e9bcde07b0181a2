#include "k8s/vgpu_provisioner.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/memory_ledger.h"
#include "node/policy_file.h"

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
    return store_.RemoveIfUnused(name);
  }

  std::vector<std::string> List() const override { return store_.List(); }

  StatusOr<task::LevelTable> Levels() const override { return node::LoadLevels(store_.root()); }

 private:
  core::VgpuStore store_;
};

}  // namespace

std::unique_ptr<VgpuProvisioner> NewStoreProvisioner(const std::string& state_root) {
  return std::make_unique<StoreProvisioner>(state_root);
}

}  // namespace gpuslice::k8s
