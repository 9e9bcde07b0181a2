#include "interposer/driver_patching.h"

#include <dlfcn.h>

#include "interposer/driver_table.h"
#include "interposer/real_dlsym.h"
#include "port/log.h"
#include "rm/ioctl_hook.h"
#include "rm/tsg_registry.h"

namespace gpuslice::interposer {
namespace {

void* ResolveDefault(const char* symbol) { return RealDlsym(RTLD_DEFAULT, symbol); }

}  // namespace

void PatchDriver() {
  if (rm::IoctlHookInstalled()) return;
  void* handle = RealDriverHandle();
  if (handle != nullptr) rm::InstallIoctlHook(handle, &ResolveDefault, ExportedIoctl());
}

void LibraryWatch::Tick(uint64_t now_ms) {
  // Libraries the driver loads as it starts contexts are in by now.
  if (!watched_early_ && now_ms - started_ms_ >= 100) {
    watched_early_ = true;
    rm::WatchNvidiaLibraries(&ResolveDefault);
  }
  if (!watched_late_ && now_ms - started_ms_ >= 2000) {
    watched_late_ = true;
    rm::WatchNvidiaLibraries(&ResolveDefault);
    if (port::LogEnabled(port::LogLevel::kInfo)) {
      // Once, 2 s in: whether the hook sees the driver's ioctls at all.
      rm::TsgRef tsgs[rm::TsgRegistry::kCapacity];
      const rm::IoctlHookStats stats = rm::HookStats();
      port::Log(port::LogLevel::kInfo, "after 2 s: %u channel groups tracked; the driver made %llu ioctls, %llu "
                "RM allocations", rm::Registry().Snapshot(tsgs, rm::TsgRegistry::kCapacity),
                static_cast<unsigned long long>(stats.ioctls), static_cast<unsigned long long>(stats.rm_allocs));
    }
  }
}

}  // namespace gpuslice::interposer
