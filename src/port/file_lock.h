// file_lock.h — an flock(2) on a file of the state directory, waited for at
// most a bounded time.
//
// The state directory's locks (.lock, .schedule.lock, a vGPU's members) are
// held for milliseconds by a healthy holder. A holder that is stopped or hung
// (a SIGSTOPped daemon caught in a schedule pass) keeps its lock for as long
// as it stays so, and an unbounded wait would hang every command behind it.
// So a wait ends at its bound with an error naming the lock, its holder where
// /proc/locks tells, and the fix; the caller fails open or fails clearly.
// The kernel drops a lock when its holder dies: no `kill -9` leaves one held.
//
// Slow path: allocates, makes syscalls, and sleeps while it waits (polling,
// at most 50 ms between tries). Thread-compatible: each call is independent.
#ifndef GPUSLICE_PORT_FILE_LOCK_H_
#define GPUSLICE_PORT_FILE_LOCK_H_

#include <chrono>
#include <string>

#include "core/status.h"
#include "port/unique_fd.h"

namespace gpuslice::port {

// How long a command or the daemon waits for a lock of the state directory
// before it takes the holder for stuck.
inline constexpr std::chrono::milliseconds kStateLockWait{5000};

enum class LockMode { kShared, kExclusive };

// Opens `path` (creating it 0600) and locks it, trying until `wait` has
// passed (0: once). The descriptor holds the lock until it is closed.
StatusOr<UniqueFd> LockFile(const std::string& path, LockMode mode, std::chrono::milliseconds wait);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_FILE_LOCK_H_
