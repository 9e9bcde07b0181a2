// fuzz_target.h — the libFuzzer entry points every fuzz target defines, and
// the replay driver (replay_main.cc) calls when built without libFuzzer.
//
// Called from one thread, once per input; an input that breaks an invariant
// calls FuzzCheckFailed, which prints the reason and aborts, so that both
// libFuzzer and ctest report it as a crash.
#ifndef GPUSLICE_FUZZ_FUZZ_TARGET_H_
#define GPUSLICE_FUZZ_FUZZ_TARGET_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuslice::fuzz {

[[noreturn]] inline void FuzzCheckFailed(const char* what, const char* detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n  %s\n", what, detail);
  std::abort();
}

}  // namespace gpuslice::fuzz

#endif  // GPUSLICE_FUZZ_FUZZ_TARGET_H_
