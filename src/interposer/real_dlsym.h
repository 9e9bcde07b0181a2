// real_dlsym.h — libc's dlsym, bypassing the one this library exports.
//
// Inside this library every symbol lookup must use RealDlsym(): in LD_PRELOAD
// mode a plain dlsym() call binds to our own exported dlsym, which would
// re-enter the hooks. Thread-safe; one relaxed load after the first call.
#ifndef GPUSLICE_INTERPOSER_REAL_DLSYM_H_
#define GPUSLICE_INTERPOSER_REAL_DLSYM_H_

namespace gpuslice::interposer {

void* RealDlsym(void* handle, const char* name);

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_REAL_DLSYM_H_
