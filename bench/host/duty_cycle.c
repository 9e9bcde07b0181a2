// duty_cycle.c — does a thread that sleeps between short runs work slower
// while it runs? The question behind a hard cap's error for host-bound
// applications (docs/benchmarks.md, "The cap's error by kernel length"):
// a capped vGPU's process runs ~1.4 ms in every ~4.9 ms.
//
//   cc -O2 -o /tmp/duty_cycle bench/host/duty_cycle.c
//   /tmp/duty_cycle RUN_US SLEEP_US TABLE_MB   (SLEEP_US 0: run continuously)
//
// Walks a TABLE_MB table by dependent loads (latency-bound, as an
// interpreter is) for RUN_US, sleeps SLEEP_US, for 3 s; prints the walk's
// rate while running. TABLE_MB 0 runs an arithmetic loop instead.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s RUN_US SLEEP_US TABLE_MB\n", argv[0]);
    return 2;
  }
  const double run_us = atof(argv[1]), sleep_us = atof(argv[2]);
  const size_t n = (size_t)atoi(argv[3]) * 1024 * 1024 / 8;
  uint64_t* table = n ? malloc(n * 8) : NULL;
  for (size_t i = 0; i < n; ++i) table[i] = (i * 2654435761u + 1) % n;
  uint64_t iterations = 0, busy_ns = 0, j = 0;
  for (const uint64_t end = Now() + 3000000000ull; Now() < end;) {
    const uint64_t start = Now(), until = start + (uint64_t)(run_us * 1000);
    while (Now() < until) {
      for (int k = 0; k < 16; ++k) j = n ? table[j] : j * 6364136223846793005ull + 1442695040888963407ull;
      ++iterations;
    }
    busy_ns += Now() - start;
    if (sleep_us > 0) {
      const struct timespec ts = {0, (long)(sleep_us * 1000)};
      nanosleep(&ts, NULL);
    }
  }
  printf("table %s MB, run %.0f us, sleep %.0f us: %.2f walks/us while running (%llu)\n", argv[3], run_us, sleep_us,
         iterations / (busy_ns / 1000.0), (unsigned long long)j);
  free(table);
  return 0;
}
