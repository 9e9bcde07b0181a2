#include "core/vgpu_layout.h"

#include <cstring>

namespace gpuslice::core {

std::string CorruptedStateMessage(const std::string& dir, const std::string& file, const std::string& why) {
  return "vGPU state at " + dir + " is corrupted (" + file + ": " + why +
         "); stop the processes using it, delete " + dir + ", and start again";
}

namespace {

std::string WrongVersionMessage(const std::string& dir, uint32_t version) {
  return "vGPU state at " + dir + " has layout version " + std::to_string(version) + ", this gpuslice reads version " +
         std::to_string(kLayoutVersion) + "; use the gpuslice that created it, or stop its processes and delete " +
         dir;
}

}  // namespace

Status ValidateLimits(const Limits& limits, const std::string& dir) {
  if (limits.header.magic != kLimitsMagic) return Status::Error(CorruptedStateMessage(dir, "limits", "bad magic"));
  if (limits.header.version != kLayoutVersion) return Status::Error(WrongVersionMessage(dir, limits.header.version));
  if (limits.header.size != sizeof(Limits)) return Status::Error(CorruptedStateMessage(dir, "limits", "wrong size"));
  if (limits.device_count > kMaxDevices) return Status::Error(CorruptedStateMessage(dir, "limits", "too many devices"));
  if (memchr(limits.name, '\0', sizeof limits.name) == nullptr) {
    return Status::Error(CorruptedStateMessage(dir, "limits", "unterminated name"));
  }
  return Status::Ok();
}

Status ValidateLedger(const Ledger& ledger, const std::string& dir) {
  if (ledger.header.magic != kLedgerMagic) return Status::Error(CorruptedStateMessage(dir, "ledger", "bad magic"));
  if (ledger.header.version != kLayoutVersion) return Status::Error(WrongVersionMessage(dir, ledger.header.version));
  if (ledger.header.size != sizeof(Ledger)) return Status::Error(CorruptedStateMessage(dir, "ledger", "wrong size"));
  if (ledger.slot_high_water > kMaxProcesses) {
    return Status::Error(CorruptedStateMessage(dir, "ledger", "slot count out of range"));
  }
  return Status::Ok();
}

}  // namespace gpuslice::core
