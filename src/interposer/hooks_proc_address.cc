// hooks_proc_address.cc — entry points handed out by lookup rather than by
// linking: cuGetProcAddress (how the CUDA 12/13 runtime gets *every* driver
// function) and dlsym (how frameworks that dlopen libcuda.so.1 find them).
//
// cuGetProcAddress: the real driver decides which version of a symbol the
// caller's CUDA version and flags select (cuMemAlloc -> cuMemAlloc_v2,
// cuLaunchKernel + per-thread flag -> cuLaunchKernel_ptsz, ...). We let it,
// then swap the function it chose for our hook of that same function. So the
// driver's own version rules stay authoritative, and legacy variants we do
// not hook are never replaced by a hook of another signature.
//
// dlsym: when a lookup finds one of the real driver's functions (or NVML's)
// that we hook, the hook is returned instead. dlsym(RTLD_NEXT, ...) never
// reaches this file: dlsym_entry.S forwards it to libc by tail jump, because
// glibc resolves RTLD_NEXT relative to its caller's return address.
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "interposer/driver_table.h"
#include "interposer/export.h"
#include "interposer/hook_registry.h"
#include "interposer/real_dlsym.h"
#include "port/log.h"

namespace gpuslice::interposer {
namespace {

// Whether `symbol` has not been warned about yet (and now counts as warned).
// Every runtime in the process (PyTorch's, cuDNN's, NCCL's...) looks the
// same names up, so one warning per name is enough. Names are kept as
// hashes, in a fixed set; past 128 names every warning is shown.
bool FirstWarningFor(const char* symbol) {
  static std::atomic<uint64_t> warned[128];
  uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (const char* c = symbol; *c != '\0'; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  hash |= 1;  // never 0, the empty mark
  for (std::atomic<uint64_t>& w : warned) {
    uint64_t seen = w.load(std::memory_order_acquire);
    if (seen == 0 && w.compare_exchange_strong(seen, hash, std::memory_order_acq_rel)) return true;
    if (seen == hash) return false;
  }
  return true;
}

// A symbol the caller asked for by name whose hook we could not match to
// the driver's answer: say so, since allocations through it go unlimited.
void WarnIfUnmatched(const char* symbol, void* returned) {
  if (symbol == nullptr || returned == nullptr) return;
  char current[128];
  snprintf(current, sizeof current, "%s_v2", symbol);
  if (HookByName(symbol) == nullptr && HookByName(current) == nullptr) return;
  if (HookForRealDriverFunction(returned) != nullptr || !FirstWarningFor(symbol)) return;
  port::Log(port::LogLevel::kWarn,
            "cuGetProcAddress(\"%s\") returned an entry point gpuslice does not recognise; "
            "calls through it are not accounted",
            symbol);
}

void* SwapForHook(const char* symbol, void* real) {
  if (void* hook = HookForRealDriverFunction(real)) return hook;
  if (port::LogEnabled(port::LogLevel::kWarn)) WarnIfUnmatched(symbol, real);
  return real;
}

}  // namespace
}  // namespace gpuslice::interposer

namespace gi = gpuslice::interposer;

GPUSLICE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* status) {
  const CUresult r = GPUSLICE_REAL(cuGetProcAddress_v2)(symbol, pfn, cuda_version, flags, status);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) *pfn = gi::SwapForHook(symbol, *pfn);
  return r;
}

// The CUDA 11.3-11.8 form, without the status out-parameter. cuda.h maps the
// name to cuGetProcAddress_v2 and no longer declares it; libcuda still
// exports it, and old runtimes call it.
#undef cuGetProcAddress
extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);
GPUSLICE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  const CUresult r = GPUSLICE_REAL(cuGetProcAddress)(symbol, pfn, cuda_version, flags);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) *pfn = gi::SwapForHook(symbol, *pfn);
  return r;
}

// --- dlsym -------------------------------------------------------------------

using DlsymFn = void* (*)(void*, const char*);

extern "C" {
// Read by dlsym_entry.S.
__attribute__((visibility("hidden"))) std::atomic<DlsymFn> gpuslice_real_dlsym{nullptr};
}

namespace gpuslice::interposer {
namespace {

DlsymFn LibcDlsym() {
  DlsymFn fn = gpuslice_real_dlsym.load(std::memory_order_acquire);
  if (fn != nullptr) return fn;
  // glibc 2.34+ keeps dlsym in libc; older ones in libdl under 2.2.5.
  fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (fn == nullptr) fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  gpuslice_real_dlsym.store(fn, std::memory_order_release);
  return fn;
}

// The one thing done at load time, and only this: dlsym_entry.S must be able
// to forward an RTLD_NEXT lookup by tail jump even if it is the first dlsym
// call the process makes. dlvsym is cheap and starts nothing.
__attribute__((constructor)) void ResolveLibcDlsymEarly() { LibcDlsym(); }

// Whether `fn` lives in a real NVIDIA library (the driver or NVML), and not
// in this one. Decided by file name so that no driver resolution (and no
// lookup that could re-enter us) happens inside dlsym.
bool FromNvidiaLibrary(void* fn, const char* prefix) {
  Dl_info info, self;
  if (dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return false;
  if (dladdr(reinterpret_cast<void*>(&LibcDlsym), &self) != 0 && self.dli_fbase == info.dli_fbase) return false;
  const char* base = strrchr(info.dli_fname, '/');
  base = base == nullptr ? info.dli_fname : base + 1;
  return strncmp(base, prefix, strlen(prefix)) == 0;
}

}  // namespace

void* RealDlsym(void* handle, const char* name) {
  DlsymFn fn = LibcDlsym();
  return fn == nullptr ? nullptr : fn(handle, name);
}

}  // namespace gpuslice::interposer

// Every handle but RTLD_NEXT (see dlsym_entry.S). A lookup that finds one of
// the real driver's or NVML's functions that we hook gets the hook instead;
// another library's function of the same name stays its own.
extern "C" __attribute__((visibility("hidden"))) void* gpuslice_dlsym_impl(void* handle, const char* name) {
  void* found = gi::RealDlsym(handle, name);
  if (found == nullptr || name == nullptr) return found;
  const bool cuda = name[0] == 'c' && name[1] == 'u';
  const bool nvml = strncmp(name, "nvml", 4) == 0;
  if (!cuda && !nvml) return found;
  void* hook = gi::HookByName(name);
  if (hook == nullptr || hook == found) return found;
  return gi::FromNvidiaLibrary(found, cuda ? "libcuda.so" : "libnvidia-ml.so") ? hook : found;
}
