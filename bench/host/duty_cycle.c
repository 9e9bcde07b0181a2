// duty_cycle.c — does a thread that waits between short runs work slower
// while it runs, and does how it waits matter? The question behind a hard
// cap's error for host-bound applications (docs/benchmarks.md, "The cap's
// error by kernel length"): a capped vGPU's process runs ~1.4 ms in every
// ~4.9 ms, and waits at the gate in between (interposer/pacer.cc: a 50 µs
// yield-spin, then 30 µs naps).
//
//   cc -O2 -o /tmp/duty_cycle bench/host/duty_cycle.c
//   /tmp/duty_cycle RUN_US WAIT_US TABLE_MB [MODE [PIN]]
//
// Walks a TABLE_MB table by dependent loads (latency-bound, as an
// interpreter is) for RUN_US, waits WAIT_US, for 3 s; prints the walk's rate
// while running and how many CPUs the thread ran on. TABLE_MB 0 runs an
// arithmetic loop instead. WAIT_US 0 runs continuously. MODE is how it
// waits: sleep (one nanosleep, the default), naps (30 µs nanosleeps, as the
// gate), yield (sched_yield until the time is up) or spin (reads the clock).
// PIN 1 keeps the thread on the CPU it started on.
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void Wait(const char* mode, uint64_t ns) {
  const uint64_t until = Now() + ns;
  if (strcmp(mode, "sleep") == 0) {
    const struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
    return;
  }
  while (Now() < until) {
    if (strcmp(mode, "naps") == 0) {
      const struct timespec ts = {0, 30000};
      nanosleep(&ts, NULL);
    } else if (strcmp(mode, "yield") == 0) {
      sched_yield();
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    fprintf(stderr, "usage: %s RUN_US WAIT_US TABLE_MB [sleep|naps|yield|spin [PIN]]\n", argv[0]);
    return 2;
  }
  const double run_us = atof(argv[1]), wait_us = atof(argv[2]);
  const char* mode = argc > 4 ? argv[4] : "sleep";
  if (argc > 5 && atoi(argv[5]) != 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
  }
  const size_t n = (size_t)atoi(argv[3]) * 1024 * 1024 / 8;
  uint64_t* table = n ? malloc(n * 8) : NULL;
  for (size_t i = 0; i < n; ++i) table[i] = (i * 2654435761u + 1) % n;
  uint64_t iterations = 0, busy_ns = 0, j = 0;
  cpu_set_t seen;
  CPU_ZERO(&seen);
  for (const uint64_t end = Now() + 3000000000ull; Now() < end;) {
    CPU_SET(sched_getcpu(), &seen);
    const uint64_t start = Now(), until = start + (uint64_t)(run_us * 1000);
    while (Now() < until) {
      for (int k = 0; k < 16; ++k) j = n ? table[j] : j * 6364136223846793005ull + 1442695040888963407ull;
      ++iterations;
    }
    busy_ns += Now() - start;
    if (wait_us > 0) Wait(mode, (uint64_t)(wait_us * 1000));
  }
  printf("table %s MB, run %.0f us, wait %.0f us (%s%s): %.2f walks/us while running, on %d CPUs (%llu)\n", argv[3],
         run_us, wait_us, mode, argc > 5 && atoi(argv[5]) ? ", pinned" : "", iterations / (busy_ns / 1000.0),
         CPU_COUNT(&seen), (unsigned long long)j);
  free(table);
  return 0;
}
