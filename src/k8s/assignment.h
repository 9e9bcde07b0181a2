// assignment.h — one container's share of the node, as the device plugin
// records it: which vGPU, on which GPUs, how much, for which pod, and which
// kubelet device IDs paid for it.
//
// Records are files, one per container, under <state>/k8s/assignments/
// (AssignmentStore), so that a restarted plugin knows what it gave out, and
// the reclaimer knows whose vGPU is whose. Written to a temporary file and
// renamed: a crash leaves the old record or the new, never half of one.
//
// AssignmentStore is thread-compatible (the resource manager serialises
// access); its methods make syscalls and allocate.
#ifndef GPUSLICE_K8S_ASSIGNMENT_H_
#define GPUSLICE_K8S_ASSIGNMENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/vgpu_layout.h"
#include "k8s/device_ids.h"
#include "k8s/pod_request.h"

namespace gpuslice::k8s {

struct Assignment {
  std::string vgpu;  // vGPU name in the state directory
  std::string pod_uid;
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::vector<uint32_t> gpus;      // indices, ascending
  std::vector<std::string> uuids;  // same order
  uint32_t vcore_per_gpu = 0;
  uint64_t vmemory_units_per_gpu = 0;  // 0: no memory cap (whole GPUs without vmemory)
  // The pod's priority level, as the node resolved it when it was allocated
  // (priority_level.h): the word its vGPU has, and the level's name then.
  uint32_t level = core::LevelWord(core::Priority::kBestEffort, 0);
  std::string level_name = "be";
  double power_cap_watts = 0;  // the pod's gpuslice.io/power-cap-watts; 0 = none
  bool suspendable = false;    // the pod's gpuslice.io/suspendable
  std::map<Resource, std::vector<std::string>> device_ids;  // what the kubelet allocated, per resource
  int64_t created_unix_s = 0;

  ContainerRequest AsRequest() const;  // the per-GPU amounts, as a request for the allocator
};

// "k8s-<pod uid>-<container ordinal>": unique per container, within the
// vGPU name rules (63 characters of [A-Za-z0-9_.-]).
std::string VgpuNameFor(const std::string& pod_uid, uint32_t container_ordinal);

std::string AssignmentToJson(const Assignment& assignment);
StatusOr<Assignment> ParseAssignment(const std::string& json_text);

class AssignmentStore {
 public:
  explicit AssignmentStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  Status Save(const Assignment& assignment);
  Status Remove(const std::string& vgpu);
  // Every readable record. Unreadable ones are reported in `problems` (one
  // line each, naming the file) and skipped, never deleted: a person decides.
  std::vector<Assignment> LoadAll(std::vector<std::string>* problems) const;

 private:
  std::string dir_;
};

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_ASSIGNMENT_H_
