// got_patch.h — redirects one loaded shared object's imports of a function.
//
// Why: gpuslice must see the RM ioctls the real libcuda makes, in both load
// modes. Exporting our own `ioctl` would only catch them when we are
// LD_PRELOADed, and never when we are loaded as libcuda.so.1 from
// LD_LIBRARY_PATH. But in both modes gpuslice itself dlopens the real driver
// (interposer/driver_table.cc), so it can rewrite that object's GOT entries
// for `ioctl` (R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT relocations) right
// away, before any context exists. Nothing else in the process is touched.
//
// Handles both binding modes: with -z now / full RELRO the GOT page is made
// writable for the instant of the store and read-only again; with lazy
// binding an unresolved slot still points into the object's own PLT, so the
// caller's resolver supplies the function the slot would have bound to.
//
// Slow path: call once per object, from any thread (stores are atomic, so
// threads calling through the slot meanwhile get the old or new function).
// Allocates nothing; makes mprotect syscalls.
#ifndef GPUSLICE_RM_GOT_PATCH_H_
#define GPUSLICE_RM_GOT_PATCH_H_

#include <atomic>

namespace gpuslice::rm {

struct GotPatchResult {
  int patched = 0;              // slots rewritten (0: the object does not import the symbol)
  const char* error = nullptr;  // static text when something failed
};

// `handle` is a dlopen handle. `resolve(symbol)` returns the function an
// unresolved (lazy) slot would bind to. Before the first slot is rewritten,
// the function it called (resolved) is stored into `*original`, so that the
// replacement can forward from the instant it is reachable.
// A slot that already calls `already_hooked` (when non-null) counts as
// patched and is left alone.
GotPatchResult PatchImport(void* handle, const char* symbol, void* replacement, void* (*resolve)(const char*),
                           std::atomic<void*>* original, const void* already_hooked = nullptr);

}  // namespace gpuslice::rm

#endif  // GPUSLICE_RM_GOT_PATCH_H_
