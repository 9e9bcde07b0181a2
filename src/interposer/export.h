// export.h — marks the functions this library exports to applications.
// Everything else is hidden (-fvisibility=hidden plus libgpuslice-cuda.map).
#ifndef GPUSLICE_INTERPOSER_EXPORT_H_
#define GPUSLICE_INTERPOSER_EXPORT_H_

#define GPUSLICE_EXPORT extern "C" __attribute__((visibility("default")))

#endif  // GPUSLICE_INTERPOSER_EXPORT_H_
