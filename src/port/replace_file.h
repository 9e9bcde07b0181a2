// replace_file.h — writes a whole small file so that a reader sees the old
// contents or the new, never a part: into `<path>.tmp`, then a rename.
//
// Slow path: allocates, makes syscalls. Two writers of one path must not
// run at once (they share the temporary name).
#ifndef GPUSLICE_PORT_REPLACE_FILE_H_
#define GPUSLICE_PORT_REPLACE_FILE_H_

#include <sys/types.h>

#include <string>

#include "core/status.h"

namespace gpuslice::port {

// The error names the path and errno's text.
Status ReplaceFile(const std::string& path, const std::string& contents, mode_t mode);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_REPLACE_FILE_H_
