// request.h — request spans and pre-preemption hints as C++ scopes, over the
// C functions of gpuslice.h found with dlsym (nothing to link).
//
//   { gpuslice::RequestSpan span;  ... launch, copy back, synchronise ... }
//   { gpuslice::Hint hint;  ... prepare a request that is coming ... }
//
// A RequestSpan is gpuslice_span_begin() to gpuslice_span_end(); a Hint is
// gpuslice_hint_begin() to gpuslice_hint_end() (gpuslice.h says what they
// do). A scope is used on the thread that made it (spans are per thread in
// the library). status() is what the begin call returned: GPUSLICE_OK, or
// GPUSLICE_NOT_IN_VGPU when gpuslice's library is not loaded or the process
// is in no vGPU (then nothing happens; said once on stderr). Neither blocks
// nor allocates (the first use looks the functions up with dlsym).
#ifndef GPUSLICE_REQUEST_H_
#define GPUSLICE_REQUEST_H_

namespace gpuslice {

class RequestSpan {
 public:
  RequestSpan();
  ~RequestSpan();
  RequestSpan(const RequestSpan&) = delete;
  RequestSpan& operator=(const RequestSpan&) = delete;
  int status() const { return status_; }

 private:
  int status_;
};

class Hint {
 public:
  Hint();
  ~Hint();
  Hint(const Hint&) = delete;
  Hint& operator=(const Hint&) = delete;
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace gpuslice

#endif  // GPUSLICE_REQUEST_H_
