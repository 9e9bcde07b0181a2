// The fake_cuda_* test API (fake_cuda_api.h).
#include "entry_points.h"
#include "fake_cuda_api.h"
#include "fake_rm_client.h"
#include "holders.h"
#include "launch.h"
#include "physical.h"
#include "state.h"

extern "C" {

uint64_t fake_cuda_physical_used(int device) {
  fake_cuda::Locked locked(fake_cuda::Locked::kNoCheckpointWait);
  return fake_cuda::PhysicalUsed(locked, device);
}

uint64_t fake_cuda_physical_total(int device) { return fake_cuda::DeviceCapacity(device); }

uint64_t fake_cuda_launch_count(void) { return fake_cuda::LaunchCount(); }

uint64_t fake_cuda_call_count(const char* symbol) {
  return symbol == nullptr ? 0 : fake_cuda::CallCount(symbol);
}

void fake_cuda_reset_counters(void) {
  fake_cuda::ResetCallCounts();
  fake_cuda::ResetLaunchCount();
  fake_cuda::ResetHolders();
}

int fake_cuda_rm_handles(int* fd, uint32_t* client, uint32_t* compute_group) {
  if (fd == nullptr || client == nullptr || compute_group == nullptr) return 0;
  fake_cuda::Locked locked(fake_cuda::Locked::kNoCheckpointWait);
  return fake_rm_client::Handles(fd, client, compute_group);
}

void fake_cuda_holders(fake_cuda_holder_counts* out) {
  if (out == nullptr) return;
  const fake_cuda::HolderCounts c = fake_cuda::CountHolders();
  *out = {c.launched, c.running, c.released, c.expired, c.last_bound_ns, c.syncs_waited};
}

}  // extern "C"
