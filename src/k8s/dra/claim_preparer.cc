#include "k8s/dra/claim_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "k8s/dra/cdi_spec.h"
#include "k8s/dra/claim_allocation.h"
#include "node/power_cap_file.h"
#include "k8s/priority_level.h"
#include "port/gpu_uuid.h"

namespace gpuslice::k8s::dra {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string PreloadFile(const PreparerOptions& o) { return o.plugin_state_dir + "/ld.so.preload"; }

// The vGPU of a claim: one device per allocated GPU with its claimed share.
// The device plugin builds the same spec from its units (allocation_service.cc).
// `levels`: each device's level word, in the same order.
core::VgpuSpec SpecFor(const ClaimAllocation& claim, const std::vector<uint32_t>& levels) {
  core::VgpuSpec spec;
  spec.name = ClaimPreparer::VgpuNameFor(claim.uid);
  for (size_t i = 0; i < claim.devices.size(); ++i) {
    const AllocatedDevice& d = claim.devices[i];
    core::DeviceSpec device;
    port::ParseGpuUuid(d.gpu_uuid, &device.uuid);
    device.memory_limit_bytes = d.memory_bytes > 0 ? d.memory_bytes : core::kUnlimited;
    device.compute_share_pct = d.cores;
    device.compute_cap_pct = d.config.compute_cap_pct;
    device.priority = core::LevelClass(levels[i]);
    device.priority_rank = core::LevelRank(levels[i]);
    spec.devices.push_back(device);
  }
  // Suspendable when every device's config says so and the vGPU is
  // best-effort: a latency-critical vGPU is never suspended for memory.
  spec.suspendable = !claim.devices.empty();
  for (size_t i = 0; i < claim.devices.size(); ++i) {
    spec.suspendable = spec.suspendable && claim.devices[i].config.suspendable &&
                       core::LevelClass(levels[i]) == core::Priority::kBestEffort;
  }
  return spec;
}

// Each device's level among the node's (k8s/priority_level.h), before
// anything is made: a level this node does not have refuses the claim.
StatusOr<std::vector<uint32_t>> ResolveLevels(const ClaimAllocation& claim, const VgpuProvisioner& provisioner,
                                              const std::string& node) {
  auto table = provisioner.Levels();
  if (!table.ok())
    return Status::Error("cannot read the priority levels of node " + node + ": " + table.status().message());
  std::vector<uint32_t> words;
  for (const AllocatedDevice& d : claim.devices) {
    const std::string where = d.config.priority_field.empty() ? "the default priority" : d.config.priority_field;
    auto level = ResolveLevel(*table, d.config.priority_level, node, where);
    if (!level.ok()) return level.status();
    words.push_back(level->word);
  }
  return words;
}

}  // namespace

std::string ClaimPreparer::VgpuNameFor(const std::string& uid) { return "dra-" + uid; }

StatusOr<std::unique_ptr<ClaimPreparer>> ClaimPreparer::Open(PreparerOptions options, NodeTopology topology,
                                                             KubeApi* api, VgpuProvisioner* provisioner) {
  std::error_code ec;
  std::filesystem::create_directories(options.plugin_state_dir, ec);
  if (ec) return Status::Error("cannot create " + options.plugin_state_dir + ": " + ec.message());
  std::filesystem::create_directories(options.cdi_dir, ec);
  if (ec) return Status::Error("cannot create the CDI directory " + options.cdi_dir + ": " + ec.message());
  auto checkpoint = Checkpoint::Load(options.plugin_state_dir + "/checkpoint.json");
  if (!checkpoint.ok()) return checkpoint.status();
  if (Status s = WritePreloadFile(PreloadFile(options)); !s.ok()) return s;
  return std::unique_ptr<ClaimPreparer>(
      new ClaimPreparer(std::move(options), std::move(topology), api, provisioner, std::move(*checkpoint)));
}

ClaimPreparer::ClaimPreparer(PreparerOptions options, NodeTopology topology, KubeApi* api,
                             VgpuProvisioner* provisioner, Checkpoint checkpoint)
    : options_(std::move(options)),
      topology_(std::move(topology)),
      api_(api),
      provisioner_(provisioner),
      checkpoint_(std::move(checkpoint)),
      probe_(options_.proc_root) {}

size_t ClaimPreparer::prepared() const {
  port::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [uid, r] : checkpoint_.claims()) n += r.state == ClaimRecord::State::kPrepared ? 1 : 0;
  return n;
}

StatusOr<std::vector<PreparedDevice>> ClaimPreparer::Prepare(const std::string& ns, const std::string& uid,
                                                             const std::string& name) {
  if (uid.empty()) return Status::Error("the claim has no UID; the kubelet must send namespace, uid and name");
  port::MutexLock lock(&mu_);
  const std::string cdi_path = CdiSpecPath(options_.cdi_dir, uid);
  if (const ClaimRecord* r = checkpoint_.Find(uid); r != nullptr && r->state == ClaimRecord::State::kPrepared &&
                                                    Exists(cdi_path) && Exists(options_.vgpu_state_dir + "/vgpus/" + r->vgpu)) {
    return r->devices;  // already prepared: nothing to do
  }

  auto object = api_->GetResourceClaim(ns, name);
  if (!object.ok()) return object.status();
  const std::string got_uid = object->value("/metadata/uid"_json_pointer, std::string());
  if (got_uid != uid) {
    return Status::Error("ResourceClaim " + ns + "/" + name + " has UID " + got_uid + ", not " + uid +
                         ": it was deleted and created again; the kubelet will retry with the new one");
  }
  auto claim = ParseClaimAllocation(*object, options_.driver, options_.pool, topology_);
  if (!claim.ok()) return Status::Error("ResourceClaim " + ns + "/" + name + ": " + claim.status().message());

  auto levels = ResolveLevels(*claim, *provisioner_, options_.pool);
  if (!levels.ok()) return Status::Error("ResourceClaim " + ns + "/" + name + ": " + levels.status().message());

  // Recorded before anything exists, so that a crash from here on leaves a
  // record that an unprepare (or a second prepare) finishes.
  ClaimRecord record;
  record.namespace_name = ns;
  record.name = name;
  record.vgpu = VgpuNameFor(uid);
  if (Status s = checkpoint_.Put(uid, record); !s.ok()) return s;

  auto dir = provisioner_->Provision(SpecFor(*claim, *levels));
  if (!dir.ok()) {
    return Status::Error("ResourceClaim " + ns + "/" + name + ": cannot create vGPU " + record.vgpu + ": " +
                         dir.status().message());
  }
  // The power cap goes beside the limits before the container can start:
  // the node daemon holds it from its next pass (power_cap_file.h).
  if (!claim->devices.empty() && claim->devices.front().config.power_cap_watts > 0) {
    const VgpuConfig& c = claim->devices.front().config;
    if (Status s = node::StorePowerCap(*dir, {c.power_cap_watts, c.compute_cap_pct}); !s.ok()) {
      return Status::Error("ResourceClaim " + ns + "/" + name + ": " + s.message());
    }
  }
  auto spec = BuildCdiSpec(*claim, record.vgpu, *dir, topology_, options_.container, PreloadFile(options_));
  if (!spec.ok()) return spec.status();
  if (Status s = WriteJsonAtomically(cdi_path, *spec); !s.ok()) return s;

  for (const AllocatedDevice& d : claim->devices) {
    PreparedDevice p;
    p.requests = {d.request};
    p.pool = d.pool;
    p.device = d.device;
    p.cdi_device_ids = {CdiDeviceId(CdiDeviceName(uid, d.gpu_index))};
    p.share_id = d.share_id;
    record.devices.push_back(p);
  }
  record.state = ClaimRecord::State::kPrepared;
  if (Status s = checkpoint_.Put(uid, record); !s.ok()) return s;
  return record.devices;
}

Status ClaimPreparer::Unprepare(const std::string& uid) {
  if (uid.empty()) return Status::Error("the claim has no UID; the kubelet must send namespace, uid and name");
  port::MutexLock lock(&mu_);
  const std::string cdi_path = CdiSpecPath(options_.cdi_dir, uid);
  // Also done for a claim the checkpoint does not know: a crash between a
  // write and its record must not leave a spec or vGPU behind.
  if (unlink(cdi_path.c_str()) != 0 && errno != ENOENT) {
    return Status::Error("cannot remove the CDI spec " + cdi_path + ": " + strerror(errno));
  }
  probe_.Refresh();
  auto released = provisioner_->Release(VgpuNameFor(uid), probe_);
  if (!released.ok()) return released.status();
  if (!*released) {
    return Status::Error("vGPU " + VgpuNameFor(uid) +
                         " is still used by processes of the claim's containers; the kubelet retries the unprepare");
  }
  if (checkpoint_.Find(uid) == nullptr) return Status::Ok();
  return checkpoint_.Erase(uid);
}

}  // namespace gpuslice::k8s::dra
