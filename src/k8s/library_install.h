// library_install.h — `gpuslice install-library`: copies the library that
// the plugins mount into containers from the image to the node.
//
// The plugins' DaemonSets run it as their init container, so the image
// needs no shell. Each file is written under a temporary name in the target
// directory and renamed over the old one: a container that already mounts
// the old file keeps it intact, and no container ever sees half a file.
//
// Slow path, blocking file I/O. Thread-compatible.
#ifndef GPUSLICE_K8S_LIBRARY_INSTALL_H_
#define GPUSLICE_K8S_LIBRARY_INSTALL_H_

#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::k8s {

// The files installed, relative to the library directory: the interposer
// (preload mode, both plugins) and the shim (libpath mode, device plugin).
const std::vector<std::string>& InstalledLibraryFiles();

// Copies every InstalledLibraryFiles() entry from `from_dir` to `to_dir`
// (created 0755 with its parents), mode 0755, each replaced by rename.
// Stops at the first error, which names the file and the fix; files already
// replaced stay replaced (each is whole).
Status InstallLibrary(const std::string& from_dir, const std::string& to_dir);

}  // namespace gpuslice::k8s

#endif  // GPUSLICE_K8S_LIBRARY_INSTALL_H_
