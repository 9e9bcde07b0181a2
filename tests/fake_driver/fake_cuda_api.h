/* fake_cuda_api.h — the test-only C API of the fake CUDA driver
 * (build/fake_driver/libcuda.so.1), beside the cu* entry points.
 *
 * Tests reach it through dlsym on the handle of the fake driver, so that
 * they observe what reached the "GPU" below whatever sits in between (the
 * gpuslice interposer): e.g. that a refused allocation never arrived.
 * The typedefs name each function's pointer type for that dlsym.
 *
 * Thread-safe; none of these block for long or allocate. Plain C, so that any
 * test can include it; no cuda.h needed. */
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_FAKE_CUDA_API_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_FAKE_CUDA_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes that fake GPU `device` really holds for this process: plain and
 * managed allocations, pool reservations (not just pool use), VMM handles,
 * arrays and graph pools. 0 for a device that does not exist. */
uint64_t fake_cuda_physical_used(int device);
typedef uint64_t (*fake_cuda_physical_used_fn)(int device);

/* FAKE_GPU_MEMORY: the capacity of each fake GPU, in bytes. */
uint64_t fake_cuda_physical_total(int device);
typedef uint64_t (*fake_cuda_physical_total_fn)(int device);

/* Kernels launched: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel
 * (and their _ptsz forms) outside stream capture, plus the kernel nodes of
 * each launched graph. */
uint64_t fake_cuda_launch_count(void);
typedef uint64_t (*fake_cuda_launch_count_fn)(void);

/* Calls of the driver entry point with exported name `symbol`
 * ("cuMemAlloc_v2", not "cuMemAlloc"), whether or not they succeeded,
 * including calls made before cuInit and calls of the generated
 * CUDA_ERROR_NOT_SUPPORTED stubs. 0 for names that are not entry points. */
uint64_t fake_cuda_call_count(const char* symbol);
typedef uint64_t (*fake_cuda_call_count_fn)(const char* symbol);

/* gpuslice's holder kernel as the fake models it (holders.h): holders
 * launched, still running, ended by release, ended by their bound; the
 * newest one's bound; and how often cuCtxSynchronize had to wait for one. */
typedef struct {
  uint64_t launched, running, released, expired, last_bound_ns, syncs_waited;
} fake_cuda_holder_counts;
void fake_cuda_holders(fake_cuda_holder_counts* out);
typedef void (*fake_cuda_holders_fn)(fake_cuda_holder_counts* out);

/* The RM handles of the process's channel groups as the fake made them
 * (fake_rm_client.h): its RM descriptor, client, and the compute channel
 * group of its first context; 0 when no fake RM device is preloaded. What a
 * tenant that watched its own driver's ioctls would know. */
int fake_cuda_rm_handles(int* fd, uint32_t* client, uint32_t* compute_group);
typedef int (*fake_cuda_rm_handles_fn)(int* fd, uint32_t* client, uint32_t* compute_group);

/* Zeroes the call, launch and holder counters (not the memory state). */
void fake_cuda_reset_counters(void);
typedef void (*fake_cuda_reset_counters_fn)(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUSLICE_TESTS_FAKE_DRIVER_FAKE_CUDA_API_H_ */
