// limits_writer.h — a writable mapping of a vGPU's limits, for the daemon's
// live resize.
//
// The limits file is 0444 so that no application can open it for writing.
// Its owner (the daemon's user) lifts the write bit for the instant it takes
// to open the mapping, then puts the mode back; root needs no such step. The
// mapping stays writable after the mode is restored.
//
// Called under VgpuManager's lock, from gRPC threads. Makes syscalls.
#ifndef GPUSLICE_DAEMON_LIMITS_WRITER_H_
#define GPUSLICE_DAEMON_LIMITS_WRITER_H_

#include <string>

#include "core/status.h"
#include "port/mapped_file.h"

namespace gpuslice::daemon {

StatusOr<port::MappedFile> OpenLimitsForWrite(const std::string& vgpu_dir);

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_LIMITS_WRITER_H_
