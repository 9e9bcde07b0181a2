// mutex.h — the mutex of the daemon, node, Kubernetes and task code, with
// its lock contract visible to Clang's thread-safety analysis
// (port/thread_annotations.h):
//   Mutex      a std::mutex declared a capability, so members can be
//              GUARDED_BY it and helpers can REQUIRE it;
//   MutexLock  holds a Mutex for a scope (and can let go of it and take it
//              again within the scope, around slow work);
//   CondVar    a std::condition_variable that waits on a Mutex the caller
//              holds.
// Each costs what the std type under it costs (MutexLock adds one flag).
//
// Thread-safety: a Mutex is what makes other state thread-safe; it is not
// recursive (locking it twice on one thread deadlocks). A MutexLock belongs
// to the thread that made it. A CondVar may be waited on and notified from
// any thread, always with the same Mutex. Lock and Wait block; nothing here
// allocates.
//
// Predicates passed to CondVar's waits run with the mutex held, but Clang
// analyses a lambda as a function of its own, so one that reads guarded
// members says so first: `[this] { mu_.AssertHeld(); return stop_; }`.
//
// The interposer keeps std::mutex for its few process-local locks, and
// src/core/'s shared memory is lock-free: neither uses this.
#ifndef GPUSLICE_PORT_MUTEX_H_
#define GPUSLICE_PORT_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "port/thread_annotations.h"

namespace gpuslice::port {

class CondVar;

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

  // Tells the analysis that the calling thread holds this mutex, where it
  // cannot see it (a predicate run inside CondVar's wait). Checks nothing
  // at run time: std::mutex cannot tell who holds it.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Locks `mu` for the scope. Unlock() and Lock() let go of it and take it
// again inside the scope (work that must run outside the lock); the
// destructor unlocks only if held.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// std::condition_variable's waits, on a Mutex the caller holds (REQUIRES):
// each releases it while blocked and holds it again when it returns.
// Spurious wakeups are possible in the forms without a predicate.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's
  }
  template <typename Predicate>
  void Wait(Mutex* mu, Predicate ready) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock, std::move(ready));
    lock.release();
  }
  // Returns false on timeout.
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const std::cv_status status = cv_.wait_for(lock, timeout);
    lock.release();
    return status == std::cv_status::no_timeout;
  }
  // Returns ready(): false when the timeout passed first.
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex* mu, std::chrono::duration<Rep, Period> timeout, Predicate ready) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool result = cv_.wait_for(lock, timeout, std::move(ready));
    lock.release();
    return result;
  }

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_MUTEX_H_
