#include "k8s/allocation_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "core/vgpu_store.h"
#include "k8s/cdi.h"
#include "k8s/names.h"
#include "k8s/pod_matcher.h"
#include "k8s/priority_level.h"
#include "node/power_cap_file.h"
#include "port/nvml_library.h"

namespace gpuslice::k8s {
namespace {

grpc::Status Invalid(const std::string& m) { return {grpc::StatusCode::INVALID_ARGUMENT, m}; }
grpc::Status Precondition(const std::string& m) { return {grpc::StatusCode::FAILED_PRECONDITION, m}; }
grpc::Status Internal(const std::string& m) { return {grpc::StatusCode::INTERNAL, m}; }

std::string JoinIndices(const std::vector<uint32_t>& v) {
  std::string out;
  for (uint32_t i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

Resource Other(Resource r) { return r == Resource::kVcore ? Resource::kVmemory : Resource::kVcore; }

// Checks one list of device IDs sent for `resource`; `field` names it in
// errors. Fills the GPU of each ID.
grpc::Status CheckIds(const ResourceManager& resources, Resource resource,
                      const google::protobuf::RepeatedPtrField<std::string>& ids, const std::string& field,
                      std::vector<uint32_t>* gpus) {
  const std::string name = ResourceName(resource);
  if (ids.empty()) {
    return Invalid(field + " is empty: a container request must name the " + name +
                   " device IDs the kubelet chose from ListAndWatch");
  }
  if (static_cast<uint64_t>(ids.size()) > resources.DeviceCount(resource)) {
    return Invalid(field + " names " + std::to_string(ids.size()) + " " + name + " devices but this node has only " +
                   std::to_string(resources.DeviceCount(resource)));
  }
  std::set<std::string> seen;
  for (const std::string& id : ids) {
    const auto gpu = resources.GpuOf(resource, id);
    if (!gpu) {
      if (resources.GpuOf(Other(resource), id)) {
        return Invalid(field + ": device ID \"" + id + "\" belongs to " + ResourceName(Other(resource)) + ", not " +
                       name + "; send it to that resource's plugin socket");
      }
      return Invalid(field + ": unknown " + name + " device ID \"" + id.substr(0, 80) +
                     "\"; device IDs come from this plugin's ListAndWatch (a kubelet holding IDs from an older "
                     "plugin or another node should be restarted)");
    }
    if (!seen.insert(id).second) return Invalid(field + ": device ID \"" + id + "\" is listed twice");
    gpus->push_back(*gpu);
  }
  return grpc::Status::OK;
}

// vcore comes as a share of one GPU or as whole GPUs (pod_request.h).
grpc::Status CheckAmount(Resource resource, uint64_t count, const std::string& field) {
  if (resource == Resource::kVcore && count > 100 && count % 100 != 0) {
    return Invalid(field + " asks for " + std::to_string(count) +
                   " gpuslice.io/vcore: that is neither a share of one GPU (1 to 100) nor whole GPUs (a multiple of "
                   "100); fix the container's resource request");
  }
  return grpc::Status::OK;
}

core::VgpuSpec SpecFor(const Assignment& a) {
  core::VgpuSpec spec;
  spec.name = a.vgpu;
  for (const std::string& uuid : a.uuids) {
    core::DeviceSpec d;
    port::ParseGpuUuid(uuid, &d.uuid);
    d.memory_limit_bytes = a.vmemory_units_per_gpu > 0 ? a.vmemory_units_per_gpu * kVmemoryUnitBytes : core::kUnlimited;
    d.compute_share_pct = std::clamp<uint32_t>(a.vcore_per_gpu, 1, 100);
    d.priority = core::LevelClass(a.level);
    d.priority_rank = core::LevelRank(a.level);
    spec.devices.push_back(d);
  }
  spec.suspendable = a.suspendable && core::LevelClass(a.level) == core::Priority::kBestEffort;
  return spec;
}

// The power cap beside the vGPU's limits, before the container starts: the
// node daemon holds it from its next pass (node/power_cap_file.h).
Status StorePowerCapOf(const Assignment& a, const std::string& dir) {
  if (a.power_cap_watts <= 0) return Status::Ok();
  return node::StorePowerCap(dir, {a.power_cap_watts, 0});
}

uint32_t UnitOf(const std::string& id) {
  const auto parsed = ParseDeviceId(id);
  return parsed ? parsed->unit : 0;
}

}  // namespace

AllocationService::AllocationService(ResourceManager* resources, KubeApi* api, VgpuProvisioner* provisioner,
                                     AssignmentStore* store, ContainerEnvironment environment, PackingPolicy policy,
                                     std::function<int64_t()> now_unix_s)
    : resources_(resources),
      api_(api),
      provisioner_(provisioner),
      store_(store),
      environment_(std::move(environment)),
      policy_(policy),
      now_unix_s_(std::move(now_unix_s)) {
  if (!now_unix_s_) {
    now_unix_s_ = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
}

grpc::Status AllocationService::Allocate(Resource resource, const v1beta1::AllocateRequest& request,
                                         v1beta1::AllocateResponse* response) {
  if (request.container_requests().empty()) {
    return Invalid("AllocateRequest has no container requests; the kubelet sends one per container");
  }
  port::MutexLock lock(&mu_);
  // What this call changed (vGPU -> its assignment before the call, none if
  // new), to undo when a later container of the same call fails.
  std::map<std::string, std::optional<Assignment>> undo;
  for (int i = 0; i < request.container_requests_size(); ++i) {
    const std::vector<Assignment> before = resources_->Assignments();
    grpc::Status s = AllocateContainer(resource, request.container_requests(i), response->add_container_responses());
    if (!s.ok()) {
      for (const auto& [vgpu, prior] : undo) {
        if (prior) {
          (void)store_->Save(*prior);
          resources_->Put(*prior);
        } else {
          (void)store_->Remove(vgpu);
          resources_->Erase(vgpu);
          (void)provisioner_->Release(vgpu, port::SystemProcessProbe());
        }
      }
      response->Clear();
      if (request.container_requests_size() > 1) {
        return grpc::Status(s.error_code(), "container request " + std::to_string(i) + ": " + s.error_message());
      }
      return s;
    }
    for (const Assignment& a : resources_->Assignments()) {
      if (undo.count(a.vgpu) > 0) continue;
      const auto prior =
          std::find_if(before.begin(), before.end(), [&](const Assignment& b) { return b.vgpu == a.vgpu; });
      if (prior == before.end()) {
        undo[a.vgpu] = std::nullopt;
      } else if (AssignmentToJson(*prior) != AssignmentToJson(a)) {
        undo[a.vgpu] = *prior;
      }
    }
  }
  return grpc::Status::OK;
}

grpc::Status AllocationService::AllocateContainer(Resource resource, const v1beta1::ContainerAllocateRequest& request,
                                                  v1beta1::ContainerAllocateResponse* response) {
  const std::string name = ResourceName(resource);
  std::vector<uint32_t> id_gpus;
  if (grpc::Status s = CheckIds(*resources_, resource, request.devices_ids(), "Allocate", &id_gpus); !s.ok()) return s;
  if (grpc::Status s = CheckAmount(resource, request.devices_ids_size(), "Allocate"); !s.ok()) return s;
  const std::vector<std::string> ids(request.devices_ids().begin(), request.devices_ids().end());
  const uint64_t count = ids.size();
  const std::string& node = resources_->node_name();

  if (api_ == nullptr) {
    return Precondition("the plugin has no Kubernetes API access, so it cannot tell which pod these " + name +
                        " devices are for; run it with its service account (deploy/k8s/device-plugin.yaml) or "
                        "pass --kube-api-url");
  }
  auto items = api_->ListPodsOnNode(node);
  if (!items.ok())
    return {grpc::StatusCode::UNAVAILABLE, "cannot list the pods of node " + node + ": " + items.status().message()};
  std::vector<std::string> problems;
  const std::vector<PodRequest> pods = WaitingPods(*items, node, &problems);
  for (const std::string& p : problems) spdlog::warn("{}", p);

  // The same IDs again for a container still waiting (a retried call): the
  // same answer, nothing new. The same IDs for anyone else are the kubelet
  // reusing the devices of a pod that ended: a new allocation, and the old
  // assignment is the reclaimer's.
  if (auto done = resources_->FindByDeviceIds(resource, ids)) {
    const bool waiting =
        std::any_of(pods.begin(), pods.end(), [&](const PodRequest& p) { return p.uid == done->pod_uid; });
    if (waiting) {
      auto dir = provisioner_->Provision(SpecFor(*done));
      if (!dir.ok()) return Internal("vGPU " + done->vgpu + ": " + dir.status().message());
      if (Status s = StorePowerCapOf(*done, *dir); !s.ok()) return Internal("vGPU " + done->vgpu + ": " + s.message());
      auto built = BuildContainerResponse(*done, *dir, resources_->topology(), environment_);
      if (!built.ok()) return Precondition(built.status().message());
      if (Status s = AddCdiDevice(*done, *dir, &*built); !s.ok()) {
        spdlog::warn("{}", s.message());
      }
      *response = std::move(*built);
      return grpc::Status::OK;
    }
  }

  auto served = [&](const PodRequest& pod, const ContainerRequest& c) {
    const auto a = resources_->FindContainer(pod.uid, c.name);
    return a && a->device_ids.count(resource) > 0 && !a->device_ids.at(resource).empty();
  };
  const auto match = MatchContainer(pods, resource, count, served);
  if (!match) {
    return Precondition("no pod waiting on node " + node + " has a container asking for exactly " +
                        std::to_string(count) + " " + name +
                        " that is not set up yet (waiting: " + DescribeWaitingPods(pods) + ")" +
                        (problems.empty() ? "" : "; unreadable requests: " + problems.front()));
  }
  const PodRequest& pod = match->pod;
  const ContainerRequest& c = match->container;
  const std::string who = "container " + c.name + " of pod " + pod.Describe();

  const std::optional<Assignment> existing = resources_->FindContainer(pod.uid, c.name);
  Assignment a;
  if (existing) {
    a = *existing;
  } else {
    // The pod's level among this node's (priority_level.h): a name the node
    // does not have is refused here, before anything is made.
    auto levels = provisioner_->Levels();
    if (!levels.ok()) {
      return Precondition("cannot read the priority levels of node " + node + " for " + who + ": " +
                          levels.status().message());
    }
    auto level = ResolvePodLevel(pod, *levels, node);
    if (!level.ok()) return Precondition(level.status().message());
    const std::vector<GpuState> states = resources_->GpuStates();
    std::vector<uint32_t> chosen;
    const auto bound = pod.bound_gpus.find(c.name);
    if (bound != pod.bound_gpus.end() && (pod.bound_node.empty() || pod.bound_node == node)) {
      chosen = bound->second;
      std::sort(chosen.begin(), chosen.end());
      if (Status s = CheckPlacement(states, chosen, c); !s.ok()) {
        return Precondition("the scheduler chose GPU(s) " + JoinIndices(chosen) + " for " + who + " (annotation " +
                            kGpusAnnotation + "), but " + s.message() +
                            "; delete the pod so that it is scheduled again");
      }
    } else {
      std::vector<uint32_t> from_ids = id_gpus;
      std::sort(from_ids.begin(), from_ids.end());
      from_ids.erase(std::unique(from_ids.begin(), from_ids.end()), from_ids.end());
      if (CheckPlacement(states, from_ids, c).ok()) {
        chosen = from_ids;
      } else {
        auto placement = ChooseGpus(states, &resources_->topology(), c, policy_);
        if (!placement.ok())
          return Precondition(who + " does not fit on node " + node + ": " + placement.status().message());
        chosen = placement->gpus;
      }
    }
    a.vgpu = VgpuNameFor(pod.uid.empty() ? pod.namespace_name + "-" + pod.name : pod.uid, c.ordinal);
    a.pod_uid = pod.uid;
    a.namespace_name = pod.namespace_name;
    a.pod = pod.name;
    a.container = c.name;
    a.gpus = chosen;
    for (uint32_t index : chosen) a.uuids.push_back(resources_->topology().GpuByIndex(index)->uuid);
    a.vcore_per_gpu = c.VcorePerGpu();
    a.vmemory_units_per_gpu = c.VmemoryUnitsPerGpu();
    a.level = level->word;
    a.level_name = level->name;
    a.power_cap_watts = pod.power_cap_watts;
    a.suspendable = pod.suspendable;
    a.created_unix_s = now_unix_s_();
  }
  a.device_ids[resource] = ids;

  auto dir = provisioner_->Provision(SpecFor(a));
  if (!dir.ok()) return Internal("cannot create the vGPU of " + who + ": " + dir.status().message());
  auto undo = [&] {
    if (!existing) (void)provisioner_->Release(a.vgpu, port::SystemProcessProbe());
  };
  if (Status s = StorePowerCapOf(a, *dir); !s.ok()) {
    undo();
    return Internal("cannot set the power cap of " + who + ": " + s.message());
  }
  auto built = BuildContainerResponse(a, *dir, resources_->topology(), environment_);
  if (!built.ok()) {
    undo();
    return Precondition(built.status().message());
  }
  if (Status s = store_->Save(a); !s.ok()) {
    undo();
    return Internal("cannot record the assignment of " + who + ": " + s.message());
  }
  if (Status s = AddCdiDevice(a, *dir, &*built); !s.ok()) {
    spdlog::warn("{}; {} gets the mounts and LD_PRELOAD only", s.message(), who);
  }
  resources_->Put(a);
  spdlog::info("{} gets vGPU {} on GPU(s) {} ({} vcore, {} vmemory units per GPU, level {})", who, a.vgpu,
               JoinIndices(a.gpus), a.vcore_per_gpu, a.vmemory_units_per_gpu, a.level_name);
  *response = std::move(*built);
  return grpc::Status::OK;
}

Status AllocationService::AddCdiDevice(const Assignment& a, const std::string& vgpu_dir,
                                       v1beta1::ContainerAllocateResponse* response) {
  if (environment_.cdi_dir.empty() || environment_.inject != InjectMode::kPreload) return Status::Ok();
  const std::string state_root = core::VgpuStore::RootOf(vgpu_dir);
  const std::string preload = state_root + "/k8s/ld.so.preload";
  if (Status s = WritePreloadFile(preload); !s.ok()) return s;
  auto spec = ContainerCdiSpec(a, vgpu_dir, resources_->topology(), environment_, preload);
  if (!spec.ok()) return spec.status();
  if (Status s = WriteJsonAtomically(CdiSpecPath(environment_.cdi_dir, a.vgpu), *spec); !s.ok()) return s;
  response->add_cdi_devices()->set_name(CdiDeviceId(a.vgpu));
  return Status::Ok();
}

std::optional<std::vector<uint32_t>> AllocationService::TargetGpus(Resource resource, uint64_t count) {
  if (api_ == nullptr) return std::nullopt;
  auto items = api_->ListPodsOnNode(resources_->node_name());
  if (!items.ok()) return std::nullopt;
  const std::vector<PodRequest> pods = WaitingPods(*items, resources_->node_name(), nullptr);
  auto served = [&](const PodRequest& pod, const ContainerRequest& c) {
    const auto a = resources_->FindContainer(pod.uid, c.name);
    return a && a->device_ids.count(resource) > 0 && !a->device_ids.at(resource).empty();
  };
  const auto match = MatchContainer(pods, resource, count, served);
  if (!match) return std::nullopt;
  if (auto a = resources_->FindContainer(match->pod.uid, match->container.name)) return a->gpus;
  const std::vector<GpuState> states = resources_->GpuStates();
  const auto bound = match->pod.bound_gpus.find(match->container.name);
  if (bound != match->pod.bound_gpus.end() && CheckPlacement(states, bound->second, match->container).ok()) {
    return bound->second;
  }
  auto placement = ChooseGpus(states, &resources_->topology(), match->container, policy_);
  if (!placement.ok()) return std::nullopt;
  return placement->gpus;
}

grpc::Status AllocationService::GetPreferredAllocation(Resource resource,
                                                       const v1beta1::PreferredAllocationRequest& request,
                                                       v1beta1::PreferredAllocationResponse* response) {
  if (request.container_requests().empty()) {
    return Invalid("PreferredAllocationRequest has no container requests");
  }
  port::MutexLock lock(&mu_);
  for (const auto& c : request.container_requests()) {
    if (grpc::Status s = PreferContainer(resource, c, response->add_container_responses()); !s.ok()) {
      response->Clear();
      return s;
    }
  }
  return grpc::Status::OK;
}

grpc::Status AllocationService::PreferContainer(Resource resource,
                                                const v1beta1::ContainerPreferredAllocationRequest& request,
                                                v1beta1::ContainerPreferredAllocationResponse* response) {
  std::vector<uint32_t> gpus;
  if (grpc::Status s = CheckIds(*resources_, resource, request.available_deviceids(), "available_deviceIDs", &gpus);
      !s.ok()) {
    return s;
  }
  const std::set<std::string> available(request.available_deviceids().begin(), request.available_deviceids().end());
  for (const std::string& id : request.must_include_deviceids()) {
    if (available.count(id) == 0) {
      return Invalid("must_include_deviceIDs: \"" + id + "\" is not among available_deviceIDs");
    }
  }
  const int64_t size = request.allocation_size();
  if (size <= 0 || static_cast<uint64_t>(size) > available.size()) {
    return Invalid("allocation_size " + std::to_string(size) + " must be between 1 and the " +
                   std::to_string(available.size()) + " available devices");
  }
  if (grpc::Status s = CheckAmount(resource, static_cast<uint64_t>(size), "allocation_size"); !s.ok()) return s;

  // Available IDs per GPU, in unit order.
  std::map<uint32_t, std::vector<std::string>> by_gpu;
  for (int i = 0; i < request.available_deviceids_size(); ++i)
    by_gpu[gpus[i]].push_back(request.available_deviceids(i));
  for (auto& [gpu, list] : by_gpu) {
    std::sort(list.begin(), list.end(),
              [](const std::string& x, const std::string& y) { return UnitOf(x) < UnitOf(y); });
  }

  // The order in which GPUs are drawn from, and how much from each.
  std::vector<uint32_t> order;
  std::map<uint32_t, uint64_t> quota;
  if (auto target = TargetGpus(resource, static_cast<uint64_t>(size))) {
    order = *target;
    for (uint32_t g : order) quota[g] = (static_cast<uint64_t>(size) + order.size() - 1) / order.size();
  }
  std::vector<std::pair<uint32_t, size_t>> rest;
  for (const auto& [gpu, list] : by_gpu) {
    if (std::find(order.begin(), order.end(), gpu) == order.end()) rest.emplace_back(gpu, list.size());
  }
  // Without a known pod: one GPU that can hold it all (the fullest such for
  // binpack, the emptiest for spread), then the biggest groups.
  std::stable_sort(rest.begin(), rest.end(), [&](const auto& x, const auto& y) {
    const bool x_fits = x.second >= static_cast<size_t>(size), y_fits = y.second >= static_cast<size_t>(size);
    if (x_fits != y_fits) return x_fits;
    if (x_fits) return policy_ == PackingPolicy::kBinpack ? x.second < y.second : x.second > y.second;
    return x.second > y.second;
  });
  for (const auto& [gpu, n] : rest) order.push_back(gpu);

  std::vector<std::string> picked(request.must_include_deviceids().begin(), request.must_include_deviceids().end());
  std::set<std::string> taken(picked.begin(), picked.end());
  std::map<uint32_t, uint64_t> per_gpu;
  for (const std::string& id : picked) ++per_gpu[*resources_->GpuOf(resource, id)];
  for (int pass = 0; pass < 2 && picked.size() < static_cast<size_t>(size); ++pass) {
    for (uint32_t gpu : order) {
      for (const std::string& id : by_gpu[gpu]) {
        if (picked.size() >= static_cast<size_t>(size)) break;
        if (pass == 0 && quota.count(gpu) && per_gpu[gpu] >= quota[gpu]) break;
        if (!taken.insert(id).second) continue;
        picked.push_back(id);
        ++per_gpu[gpu];
      }
    }
  }
  for (const std::string& id : picked) response->add_deviceids(id);
  return grpc::Status::OK;
}

}  // namespace gpuslice::k8s
