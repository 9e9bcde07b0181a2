#include "k8s/reclaimer.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "k8s/cdi.h"

namespace gpuslice::k8s {

Reclaimer::Reclaimer(ResourceManager* resources, AssignmentStore* store, VgpuProvisioner* provisioner,
                     PodLiveness* liveness, HostProcessProbe* probe, std::string state_root, std::string cdi_dir,
                     std::chrono::seconds grace, std::function<int64_t()> now_unix_s)
    : resources_(resources),
      store_(store),
      provisioner_(provisioner),
      liveness_(liveness),
      probe_(probe),
      state_root_(std::move(state_root)),
      cdi_dir_(std::move(cdi_dir)),
      grace_(grace),
      now_unix_s_(std::move(now_unix_s)) {
  if (!now_unix_s_) {
    now_unix_s_ = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
}

StatusOr<uint32_t> Reclaimer::ReclaimOnce() {
  auto pods = liveness_->List();
  if (!pods.ok()) return pods.status();
  probe_->Refresh();
  const int64_t now = now_unix_s_();
  uint32_t removed = 0;
  std::set<std::string> recorded;
  for (const Assignment& a : resources_->Assignments()) {
    recorded.insert(a.vgpu);
    if (now - a.created_unix_s < grace_.count() || IsAlive(a, *pods)) continue;
    auto released = provisioner_->Release(a.vgpu, *probe_);
    if (!released.ok()) {
      spdlog::warn("cannot remove vGPU {} of gone pod {}/{}: {}", a.vgpu, a.namespace_name, a.pod,
                   released.status().message());
      continue;
    }
    if (!*released) {
      spdlog::info("pod {}/{} is gone but processes still use vGPU {}; later", a.namespace_name, a.pod, a.vgpu);
      continue;
    }
    if (Status s = store_->Remove(a.vgpu); !s.ok()) {
      spdlog::warn("{}", s.message());
    }
    resources_->Erase(a.vgpu);
    ForgetCdiSpec(a.vgpu);
    spdlog::info("pod {}/{} is gone; removed vGPU {}", a.namespace_name, a.pod, a.vgpu);
    ++removed;
  }
  // vGPUs the plugin made but never recorded.
  for (const std::string& name : provisioner_->List()) {
    if (name.rfind("k8s-", 0) != 0 || recorded.count(name) > 0) continue;
    struct stat st;
    const std::string dir = state_root_ + "/vgpus/" + name;
    if (stat(dir.c_str(), &st) == 0 && now - st.st_mtime < grace_.count()) continue;
    auto released = provisioner_->Release(name, *probe_);
    if (released.ok() && *released) {
      ForgetCdiSpec(name);
      spdlog::info("removed vGPU {}, which no container was recorded for", name);
      ++removed;
    }
  }
  return removed;
}

void Reclaimer::ForgetCdiSpec(const std::string& vgpu) {
  if (cdi_dir_.empty()) return;
  const std::string spec = CdiSpecPath(cdi_dir_, vgpu);
  if (unlink(spec.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("cannot remove {}: {}", spec, strerror(errno));
  }
}

void Reclaimer::Run(const std::atomic<bool>& stop, std::chrono::milliseconds interval) {
  bool failing = false;
  while (!stop.load()) {
    auto r = ReclaimOnce();
    if (!r.ok() && !failing) {
      spdlog::warn("cannot tell which pods are gone, reclaiming nothing: {}", r.status().message());
    }
    failing = !r.ok();
    // Sleep in short steps so that `stop` is seen within 200 ms.
    for (auto slept = std::chrono::milliseconds(0); slept < interval && !stop.load();
         slept += std::chrono::milliseconds(200)) {
      std::this_thread::sleep_for(std::min(std::chrono::milliseconds(200), interval - slept));
    }
  }
}

}  // namespace gpuslice::k8s
