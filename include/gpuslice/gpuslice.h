/* gpuslice.h — the task API: an application tells gpuslice when its
 * latency-critical (LC) work happens.
 *
 * The functions are exported by the gpuslice library that `gpuslice run`
 * (or the Kubernetes device plugin) loads into the application; link nothing.
 * Look them up with dlsym(RTLD_DEFAULT, "gpuslice_span_begin") (from Python:
 * ctypes.CDLL(None).gpuslice_span_begin), so that the same program runs
 * unchanged outside gpuslice.
 *
 * Request spans, in a vGPU run with --priority lc:
 *   gpuslice_span_begin();   a request starts (its inputs are ready)
 *   ... launch the request's kernels, copy the result back, synchronise ...
 *   gpuslice_span_end();     the request is done
 * While a span is open, best-effort vGPUs on the same GPUs launch nothing
 * new, so the gaps between an eager model's kernels are not filled with
 * best-effort work that its next kernel would wait for. Each span's length
 * is recorded in the vGPU's LC latency histogram (gpuslice top, /metrics).
 *
 * Pre-preemption hints: gpuslice_hint_begin() as soon as a request is known
 * to be coming (before its host-side preparation), gpuslice_hint_end() when
 * it is done, or gpuslice_hint(usec) for a hint that lapses by itself. Best-
 * effort vGPUs stop launching from the hint on, so their queued work drains
 * while the request is still being prepared.
 *
 * Task metrics, for a task scheduler (gpuslice/scheduler.h and the Python
 * package call it for every finished task):
 *   gpuslice_task_record("high", latency_ns, GPUSLICE_TASK_SLO_MISS);
 * counts one task of the named level (1-32 of a-z, 0-9, '_' and '-') in the
 * vGPU's shared metrics, so that `gpuslice ls --json`, `gpuslice top` and
 * /metrics show each level's tasks, latency quantiles, failures and SLO
 * misses, summed over all the vGPU's processes. Past 32 names, tasks count
 * under "other".
 *
 * Every hold is bounded (200 ms): a span or hint never ended, or ended by a
 * crash, cannot starve best-effort work for longer. Spans nest per thread
 * (only the outermost one counts). All functions are thread-safe, never
 * block, never allocate, and return a status; outside a vGPU they return
 * GPUSLICE_NOT_IN_VGPU and do nothing.
 */
#ifndef GPUSLICE_GPUSLICE_H_
#define GPUSLICE_GPUSLICE_H_

#ifdef __cplusplus
extern "C" {
#endif

enum {
  GPUSLICE_OK = 0,
  GPUSLICE_NOT_IN_VGPU = 1,      /* the process is in no vGPU: nothing to do */
  GPUSLICE_NOT_LATENCY_CRITICAL = 2, /* a best-effort vGPU: spans only count latency */
  GPUSLICE_NO_SPAN_OPEN = -1,    /* span_end without span_begin on this thread */
  GPUSLICE_BAD_ARGUMENT = -2
};

/* gpuslice_task_record's flags. */
enum {
  GPUSLICE_TASK_FAILED = 1,   /* the task ended with an exception */
  GPUSLICE_TASK_SLO_MISS = 2  /* it took longer than its SLO */
};

int gpuslice_span_begin(void);
int gpuslice_span_end(void);
int gpuslice_hint_begin(void);
int gpuslice_hint_end(void);
int gpuslice_hint(unsigned int usec);
int gpuslice_task_record(const char* level, unsigned long long latency_ns, int flags);

#ifdef __cplusplus
}
#endif

#endif /* GPUSLICE_GPUSLICE_H_ */
