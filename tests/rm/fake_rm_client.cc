#include "fake_rm_client.h"

#include <dlfcn.h>
#include <sys/ioctl.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <vector>

#include "rm/rm_abi.h"

namespace fake_rm_client {
namespace {

using gpuslice::rm::NvHandle;

struct State {
  int fd = -1;
  NvHandle client = 0;
  NvHandle next_handle = 0x5c000001;
  std::map<const void*, std::vector<NvHandle>> groups;
};

State* Get() {
  static State* state = [] {
    auto* s = new State;
    using OpenFn = int (*)();
    auto open_fn = reinterpret_cast<OpenFn>(dlsym(RTLD_DEFAULT, "fake_rm_open"));
    if (open_fn == nullptr) return s;  // no fake RM device in this process
    s->fd = open_fn();
    gpuslice::rm::Nvos64 a{};
    a.hClass = gpuslice::rm::kClassRootClient;
    if (ioctl(s->fd, gpuslice::rm::IoctlRequest(gpuslice::rm::kEscRmAlloc, sizeof a), &a) == 0 && a.status == 0) {
      s->client = a.hObjectNew;
    }
    return s;
  }();
  return state->client != 0 ? state : nullptr;
}

}  // namespace

int Handles(int* fd, uint32_t* client, uint32_t* compute_group) {
  State* s = Get();
  if (s == nullptr || s->groups.empty() || s->groups.begin()->second.empty()) return 0;
  *fd = s->fd;
  *client = s->client;
  *compute_group = s->groups.begin()->second.front();  // engine type 1 comes first
  return 1;
}

bool ContextCreated(const void* context) {
  State* s = Get();
  if (s == nullptr) return true;
  // NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS: {hObjectError, hObjectEccError,
  // hVASpace, engineType, ...}.
  for (uint32_t engine : {1u, 11u, 12u, 13u}) {
    uint32_t params[8] = {0, 0, 0, engine};
    gpuslice::rm::Nvos64 a{};
    a.hRoot = s->client;
    a.hObjectParent = s->client;
    a.hObjectNew = s->next_handle++;
    a.hClass = gpuslice::rm::kClassChannelGroup;
    a.pAllocParms = reinterpret_cast<uint64_t>(params);
    a.paramsSize = 0;  // as driver 580's libcuda does (RM sizes parameters by class)
    if (ioctl(s->fd, gpuslice::rm::IoctlRequest(gpuslice::rm::kEscRmAlloc, sizeof a), &a) == 0 && a.status == 0) {
      s->groups[context].push_back(a.hObjectNew);
    }
  }
  const char* slice = getenv("FAKE_RM_DRIVER_SLICE_US");
  if (slice == nullptr || *slice == '\0' || s->groups[context].empty()) return true;
  // The parameters as the driver's own build has them (FAKE_RM_PARAMS_SIZE,
  // as the fake device accepts): {NvU64 timesliceUs, ...}.
  uint64_t params[8] = {strtoull(slice, nullptr, 0)};
  const char* size = getenv("FAKE_RM_PARAMS_SIZE");
  gpuslice::rm::Nvos54 c{};
  c.hClient = s->client;
  c.hObject = s->groups[context].front();
  c.cmd = gpuslice::rm::kCtrlSetTimeslice;
  c.params = reinterpret_cast<uint64_t>(params);
  c.paramsSize = size != nullptr && *size != '\0' ? static_cast<uint32_t>(strtoul(size, nullptr, 0)) : 8;
  if (c.paramsSize > sizeof params) c.paramsSize = sizeof params;
  const bool set =
      ioctl(s->fd, gpuslice::rm::IoctlRequest(gpuslice::rm::kEscRmControl, sizeof c), &c) == 0 && c.status == 0;
  if (!set) ContextDestroyed(context);
  return set;
}

void ContextDestroyed(const void* context) {
  State* s = Get();
  if (s == nullptr) return;
  auto it = s->groups.find(context);
  if (it == s->groups.end()) return;
  for (NvHandle h : it->second) {
    gpuslice::rm::Nvos00 f{s->client, s->client, h, 0};
    ioctl(s->fd, gpuslice::rm::IoctlRequest(gpuslice::rm::kEscRmFree, sizeof f), &f);
  }
  s->groups.erase(it);
}

}  // namespace fake_rm_client
