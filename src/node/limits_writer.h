// limits_writer.h — a writable mapping of a vGPU's limits: the one way any
// gpuslice process (the daemon, a standalone CLI, the node schedule) opens
// them for writing.
//
// The limits file is 0444 so that no application can open it for writing.
// Its owner (the user running the daemon or the standalone CLI) lifts the
// owner's write bit for the instant it takes to open the mapping, then puts
// the mode back; root needs no such step. The mapping stays writable after
// the mode is restored. Group and other bits are never touched.
//
// Called under VgpuManager's lock or the node schedule's lock, from any
// thread. Makes syscalls.
#ifndef GPUSLICE_NODE_LIMITS_WRITER_H_
#define GPUSLICE_NODE_LIMITS_WRITER_H_

#include <string>

#include "core/status.h"
#include "port/mapped_file.h"

namespace gpuslice::node {

StatusOr<port::MappedFile> OpenLimitsForWrite(const std::string& vgpu_dir);

}  // namespace gpuslice::node

#endif  // GPUSLICE_NODE_LIMITS_WRITER_H_
