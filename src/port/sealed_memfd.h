// sealed_memfd.h — shared memory that nobody can shrink or grow.
//
// A MAP_SHARED mapping of a file dies with SIGBUS on its next touch of a page
// past the file's end, so any process that could ftruncate a mapped board or
// ledger could kill every other process that maps it (issue 11: one tenant's
// `truncate -s 0` killed other vGPUs' applications and the daemon). A memfd
// sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL has a size fixed for
// ever: ftruncate and fallocate past the end fail with EPERM for every holder
// of the memory, through any descriptor (seals belong to the inode), and the
// seals cannot be removed. Contents stay writable: writers are the ledger's
// and the board's own protocols.
//
// Called from slow paths only (creation by the manager, checks at attach).
// Functions allocate nothing but make syscalls; thread-safe.
#ifndef GPUSLICE_PORT_SEALED_MEMFD_H_
#define GPUSLICE_PORT_SEALED_MEMFD_H_

#include <cstddef>
#include <string>

#include "core/status.h"

namespace gpuslice::port {

// The seals every handed-out region must carry.
int RequiredSeals();

// A new memfd of exactly `size` bytes holding `initial` (`size` bytes, or
// null for zeros), sealed against resizing (and against unsealing).
// Close-on-exec. Returns the descriptor; the caller owns it.
StatusOr<int> CreateSealedMemfd(const char* name, const void* initial, size_t size);

// OK when `fd` is sealed with at least RequiredSeals() and is exactly `size`
// bytes long, so that mapping `size` bytes of it can never fault: a region
// received from elsewhere is checked before it is mapped. `what` names it in
// the error.
Status CheckSealed(int fd, size_t size, const std::string& what);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_SEALED_MEMFD_H_
