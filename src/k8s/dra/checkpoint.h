// checkpoint.h — the DRA plugin's record of the claims it prepared, in one
// JSON file (<state dir>/dra/checkpoint.json), so that a restarted plugin
// answers NodePrepareResources and NodeUnprepareResources for claims it
// prepared before, without asking the API server again.
//
// A claim is recorded as "preparing" before anything is made for it and as
// "prepared" once its vGPU and CDI spec exist; an unprepare removes it only
// after both are gone. So after a crash at any step, the record says what
// may exist, and redoing the step (prepare or unprepare, both idempotent)
// finishes it.
//
// Not thread-safe: the ClaimPreparer owns it under its mutex. Save blocks on
// the file write (fsync) and allocates.
#ifndef GPUSLICE_K8S_DRA_CHECKPOINT_H_
#define GPUSLICE_K8S_DRA_CHECKPOINT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::k8s::dra {

struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  std::optional<std::string> share_id;
};

struct ClaimRecord {
  enum class State { kPreparing, kPrepared };
  std::string namespace_name;
  std::string name;
  State state = State::kPreparing;
  std::string vgpu;
  std::vector<PreparedDevice> devices;
};

class Checkpoint {
 public:
  // Reads `path`; a missing file is an empty checkpoint, a corrupt one an
  // error naming the file (a person decides: it says which vGPUs exist).
  static StatusOr<Checkpoint> Load(const std::string& path);

  const std::map<std::string, ClaimRecord>& claims() const { return claims_; }
  const ClaimRecord* Find(const std::string& uid) const;
  // Each writes the whole file atomically before returning.
  Status Put(const std::string& uid, const ClaimRecord& record);
  Status Erase(const std::string& uid);

 private:
  Status Save() const;
  std::string path_;
  std::map<std::string, ClaimRecord> claims_;  // by claim UID
};

}  // namespace gpuslice::k8s::dra

#endif  // GPUSLICE_K8S_DRA_CHECKPOINT_H_
