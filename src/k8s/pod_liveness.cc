#include "k8s/pod_liveness.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>

#include "k8s/podresources/v1/api.grpc.pb.h"

namespace gpuslice::k8s {
namespace {

class PodResourcesLiveness final : public PodLiveness {
 public:
  explicit PodResourcesLiveness(std::string socket) : socket_(std::move(socket)) {}

  StatusOr<std::vector<LivePod>> List() override {
    auto channel = grpc::CreateChannel("unix://" + socket_, grpc::InsecureChannelCredentials());
    auto stub = v1::PodResourcesLister::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListPodResourcesRequest request;
    v1::ListPodResourcesResponse response;
    const grpc::Status s = stub->List(&context, request, &response);
    if (!s.ok()) {
      return Status::Error("the kubelet's pod-resources API at " + socket_ + " did not answer (" + s.error_message() +
                           "); mount /var/lib/kubelet/pod-resources, or use --pod-liveness=cgroup");
    }
    std::vector<LivePod> pods;
    for (const v1::PodResources& p : response.pod_resources()) {
      LivePod live;
      live.namespace_name = p.namespace_();
      live.name = p.name();
      for (const v1::ContainerResources& c : p.containers()) {
        for (const v1::ContainerDevices& d : c.devices()) {
          live.device_ids.insert(d.device_ids().begin(), d.device_ids().end());
        }
      }
      pods.push_back(std::move(live));
    }
    return pods;
  }

 private:
  std::string socket_;
};

// Pod UIDs from a cgroup directory name: "pod<uid>" (cgroupfs driver) or
// "kubepods-<qos>-pod<uid with _ for ->.slice" (systemd driver).
std::string UidFromCgroupName(const std::string& name) {
  const size_t at = name.rfind("pod");
  if (at == std::string::npos) return "";
  if (at != 0 && name[at - 1] != '-') return "";
  std::string uid = name.substr(at + 3);
  if (uid.size() > 6 && uid.compare(uid.size() - 6, 6, ".slice") == 0) uid.resize(uid.size() - 6);
  for (char& c : uid) {
    if (c == '_') c = '-';
  }
  if (uid.size() != 36 || uid[8] != '-' || uid[13] != '-') return "";
  return uid;
}

class CgroupLiveness final : public PodLiveness {
 public:
  explicit CgroupLiveness(std::string root) : root_(std::move(root)) {}

  StatusOr<std::vector<LivePod>> List() override {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(root_, ec)) {
      return Status::Error("no cgroup filesystem at " + root_ +
                           "; mount the host's /sys/fs/cgroup or pass --cgroup-root");
    }
    // Where kubepods trees live: v2 and v1's unified layout at the root, v1
    // under each controller.
    std::vector<fs::path> tops = {root_};
    for (const char* controller : {"memory", "cpu,cpuacct", "cpu", "pids", "systemd"}) {
      if (fs::is_directory(fs::path(root_) / controller, ec)) tops.push_back(fs::path(root_) / controller);
    }
    std::set<std::string> uids;
    bool saw_kubepods = false;
    for (const fs::path& top : tops) {
      for (const auto& entry : fs::directory_iterator(top, ec)) {
        const std::string name = entry.path().filename().string();
        if (!entry.is_directory() || name.rfind("kubepods", 0) != 0) continue;
        saw_kubepods = true;
        // kubepods[/qos]/pod: at most three levels down.
        fs::recursive_directory_iterator it(entry.path(), fs::directory_options::skip_permission_denied, ec), end;
        for (; it != end; it.increment(ec)) {
          if (ec) break;
          if (it.depth() >= 2) it.disable_recursion_pending();
          if (!it->is_directory()) continue;
          const std::string uid = UidFromCgroupName(it->path().filename().string());
          if (!uid.empty()) {
            uids.insert(uid);
            it.disable_recursion_pending();
          }
        }
      }
    }
    if (!saw_kubepods) {
      return Status::Error("no kubepods cgroup under " + root_ +
                           "; is this a Kubernetes node, and is the host's cgroup filesystem mounted?");
    }
    std::vector<LivePod> pods;
    for (const std::string& uid : uids) pods.push_back({"", "", uid, {}});
    return pods;
  }

 private:
  std::string root_;
};

}  // namespace

std::unique_ptr<PodLiveness> NewPodResourcesLiveness(const std::string& socket_path) {
  return std::make_unique<PodResourcesLiveness>(socket_path);
}

std::unique_ptr<PodLiveness> NewCgroupLiveness(const std::string& cgroup_root) {
  return std::make_unique<CgroupLiveness>(cgroup_root);
}

bool IsAlive(const Assignment& a, const std::vector<LivePod>& pods) {
  for (const LivePod& p : pods) {
    if (!p.uid.empty()) {
      if (p.uid == a.pod_uid) return true;
      continue;
    }
    if (p.namespace_name != a.namespace_name || p.name != a.pod) continue;
    if (p.device_ids.empty()) return true;
    for (const auto& [resource, ids] : a.device_ids) {
      for (const std::string& id : ids) {
        if (p.device_ids.count(id) > 0) return true;
      }
    }
  }
  return false;
}

}  // namespace gpuslice::k8s
