#include "fake_rm_client.h"

#include <dlfcn.h>
#include <sys/ioctl.h>

#include <cstdint>
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

void ContextCreated(const void* context) {
  State* s = Get();
  if (s == nullptr) return;
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
