// thread_annotations.h — Clang's thread-safety attributes, as macros, so that
// lock contracts are written as annotations the compiler checks rather than
// as prose comments nobody does.
//
// Under Clang, `-Wthread-safety` then proves at compile time that every read
// or write of a GUARDED_BY member happens with its mutex held, that every
// REQUIRES function is called with it held, and that every lock is released
// on every path (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
// GCC, the normal compiler here, has no such analysis: there the macros
// expand to nothing and change no code. CI runs the analysis with clang++
// over the sources that use it (scripts/check-thread-safety.sh).
//
// The mutex these annotations name is port::Mutex (port/mutex.h); std::mutex
// carries no annotations in libstdc++, so the analysis cannot see it.
//
// Macros only: no code, no threads, nothing to allocate.
#ifndef GPUSLICE_PORT_THREAD_ANNOTATIONS_H_
#define GPUSLICE_PORT_THREAD_ANNOTATIONS_H_

// gRPC's headers bring Abseil's older, unprefixed macros
// (absl/base/internal/thread_annotations.h), and five of them share names
// with these: GUARDED_BY, PT_GUARDED_BY, ACQUIRED_BEFORE, ACQUIRED_AFTER and
// NO_THREAD_SAFETY_ANALYSIS. They expand to the same attributes, but a
// second definition in other words is an error under -Werror. So Abseil's
// come first, whichever header a file includes first, and ours fill in the
// rest.
#if __has_include(<absl/base/internal/thread_annotations.h>)
#include <absl/base/internal/thread_annotations.h>
#endif

#if defined(__clang__)
#define GPUSLICE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define GPUSLICE_THREAD_ANNOTATION_(x)  // GCC: no analysis
#endif

// A class whose objects are locks (port::Mutex); `x` names the kind in
// diagnostics.
#define CAPABILITY(x) GPUSLICE_THREAD_ANNOTATION_(capability(x))

// An RAII class that holds a capability for its lifetime (port::MutexLock).
#define SCOPED_CAPABILITY GPUSLICE_THREAD_ANNOTATION_(scoped_lockable)

// A data member that may be read or written only with `x` held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) GPUSLICE_THREAD_ANNOTATION_(guarded_by(x))
#endif

// A pointer member whose pointee may be used only with `x` held (the
// pointer itself is not guarded).
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) GPUSLICE_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif

// Lock ordering: this capability is taken before / after the ones named.
// Clang checks these only under -Wthread-safety-beta; they say the order
// where a reader looks for it.
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) GPUSLICE_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) GPUSLICE_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif

// A function that must be called with the capabilities held (and returns
// with them still held): the `...Locked` helpers.
#define REQUIRES(...) GPUSLICE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))

// A function that must be called without the capabilities held, because it
// takes them itself (calling it with one held would deadlock).
#define EXCLUDES(...) GPUSLICE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// A function that takes the capabilities (none named: `this`) and returns
// with them held.
#define ACQUIRE(...) GPUSLICE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))

// A function that releases the capabilities (none named: `this`).
#define RELEASE(...) GPUSLICE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))

// A function that checks at run time (or promises) that the capability is
// held; the analysis assumes it is from there on.
#define ASSERT_CAPABILITY(x) GPUSLICE_THREAD_ANNOTATION_(assert_capability(x))

// Turns the analysis off for one function, for locking it cannot follow.
// Say why beside each use.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS GPUSLICE_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif

#endif  // GPUSLICE_PORT_THREAD_ANNOTATIONS_H_
