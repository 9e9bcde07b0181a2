"""A service with a latency-critical request path and best-effort background
work, on gpuslice's Python task API (docs/task-api.md). Runs with or without
gpuslice: `gpuslice run --priority lc -- python3 task_api.py`."""
import gpuslice

sched = gpuslice.Scheduler()                 # or Scheduler(config="gpuslice.yaml")
@sched.latency_critical(priority="high", slo_ms=10)
def infer(x): return 2 * x                   # stands for: a model's forward pass
@sched.best_effort()
def train_step(batch): return sum(batch)     # stands for: a training step
x = 21
f = sched.submit(infer, x)                   # a concurrent.futures.Future
y = f.result(timeout=0.1)
m = sched.metrics()                          # p50/p99, SLO misses, per level

step = sched.submit(train_step, [0.5, 1.5])
print(f"infer({x}) = {y}, train step = {step.result()}")

with sched.request():                        # work on this thread as one request
    infer(1)

for level, lm in sched.metrics().items():
    if lm.count:
        print(f"{level:8} count {lm.count}  failed {lm.failed}  SLO misses {lm.slo_misses}  "
              f"p50 {lm.p50_ms:.3f} ms  p99 {lm.p99_ms:.3f} ms")
sched.close()
assert y == 42
