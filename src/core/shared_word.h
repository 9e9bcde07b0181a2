// shared_word.h — atomic operations on words that several processes map:
// the vGPU limits and ledger (core/vgpu_layout.h) and the pacing boards
// (core/pacing_board.h), read by applications' libraries and written by
// the node's writers (src/node) and the libraries themselves; also the
// experimental holder's release word, host memory the GPU polls
// (interposer/holder.h). Every access to such a word goes through one of
// these helpers, and no other file in src/ names std::atomic_ref; each
// name says its memory ordering.
//
// Why atomics on plain fields, and why they are enough for crash safety:
//   - The shared files hold plain integers (no std::atomic, whose layout the
//     standard does not fix), naturally aligned and 4 or 8 bytes wide. On
//     x86-64 and aarch64 such atomics are lock-free and *address-free*: the
//     hardware instruction works on the physical word, so two processes that
//     map one file at different addresses see one atomic object
//     ([atomics.lockfree]). The static_assert below refuses any other width.
//   - No protocol on these words takes a lock. A process may be killed
//     (kill -9, OOM) between any two of its stores, and every protocol is
//     written so that each single store leaves a state others can read and
//     repair: a slot's owner word is claimed before the slot is filled and
//     published last (release), so a reader that sees it (acquire) sees the
//     rest; a charge is one fetch-add to the process's own slot, which a
//     reaper zeroes once the process is dead; the pacing turn is one CAS'd
//     word.
//     The orderings named here are exactly what those arguments rest on, so
//     a change of ordering is a change of protocol (docs/verification.md has
//     the models that check the ledger's and the holds').
//   - SeqCst is used where a process writes one word and then reads others'
//     (the ledger's charge: add to my slot, then sum every slot): only a
//     sequentially consistent order keeps two such racers from both missing
//     each other's bytes.
//
// Words of a read-only mapping (the limits, PROT_READ in applications) are
// only ever loaded; a load never writes, so std::atomic_ref over them is
// valid even though C++20 gives atomic_ref no const form. That const_cast is
// written once, here.
//
// Thread-safety: every helper is one atomic instruction (RaiseTo*: a CAS
// loop); none blocks, allocates or makes a syscall. Any thread, any process.
#ifndef GPUSLICE_CORE_SHARED_WORD_H_
#define GPUSLICE_CORE_SHARED_WORD_H_

#include <atomic>
#include <type_traits>

namespace gpuslice::core {
namespace shared_word_internal {

template <typename T>
std::atomic_ref<T> Ref(const T& word) {
  static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                "shared words are naturally aligned 32- or 64-bit integers");
  static_assert(std::atomic_ref<T>::is_always_lock_free, "a shared word's atomics must be lock-free (address-free)");
  return std::atomic_ref<T>(const_cast<T&>(word));
}

// The value parameter is not deduced: StoreRelaxed(word32, 0) means word32's type.
template <typename T>
using Value = std::type_identity_t<T>;

}  // namespace shared_word_internal

// --- loads -------------------------------------------------------------------
template <typename T>
inline T LoadRelaxed(const T& word) {
  return shared_word_internal::Ref(word).load(std::memory_order_relaxed);
}
template <typename T>
inline T LoadAcquire(const T& word) {
  return shared_word_internal::Ref(word).load(std::memory_order_acquire);
}
template <typename T>
inline T LoadSeqCst(const T& word) {
  return shared_word_internal::Ref(word).load(std::memory_order_seq_cst);
}

// --- stores ------------------------------------------------------------------
template <typename T>
inline void StoreRelaxed(T& word, shared_word_internal::Value<T> value) {
  shared_word_internal::Ref(word).store(value, std::memory_order_relaxed);
}
template <typename T>
inline void StoreRelease(T& word, shared_word_internal::Value<T> value) {
  shared_word_internal::Ref(word).store(value, std::memory_order_release);
}
template <typename T>
inline void StoreSeqCst(T& word, shared_word_internal::Value<T> value) {
  shared_word_internal::Ref(word).store(value, std::memory_order_seq_cst);
}

// --- read-modify-write: each returns the value before ------------------------
template <typename T>
inline T FetchAddRelaxed(T& word, shared_word_internal::Value<T> delta) {
  return shared_word_internal::Ref(word).fetch_add(delta, std::memory_order_relaxed);
}
template <typename T>
inline T FetchAddRelease(T& word, shared_word_internal::Value<T> delta) {
  return shared_word_internal::Ref(word).fetch_add(delta, std::memory_order_release);
}
template <typename T>
inline T FetchAddAcqRel(T& word, shared_word_internal::Value<T> delta) {
  return shared_word_internal::Ref(word).fetch_add(delta, std::memory_order_acq_rel);
}
template <typename T>
inline T FetchAddSeqCst(T& word, shared_word_internal::Value<T> delta) {
  return shared_word_internal::Ref(word).fetch_add(delta, std::memory_order_seq_cst);
}
template <typename T>
inline T FetchSubSeqCst(T& word, shared_word_internal::Value<T> delta) {
  return shared_word_internal::Ref(word).fetch_sub(delta, std::memory_order_seq_cst);
}

// Compare-and-swap: replaces `expected` by `desired` and returns true, or
// loads the current value into `expected` and returns false. Strong unless
// named Weak (a weak one may fail spuriously: for retry loops only). The
// ordering is the success ordering; a failure orders as the matching load
// (acquire for AcqRel, seq_cst for SeqCst).
template <typename T>
inline bool CompareExchangeAcqRel(T& word, T& expected, shared_word_internal::Value<T> desired) {
  return shared_word_internal::Ref(word).compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
}
template <typename T>
inline bool CompareExchangeSeqCst(T& word, T& expected, shared_word_internal::Value<T> desired) {
  return shared_word_internal::Ref(word).compare_exchange_strong(expected, desired, std::memory_order_seq_cst);
}
template <typename T>
inline bool CompareExchangeWeakAcqRel(T& word, T& expected, shared_word_internal::Value<T> desired) {
  return shared_word_internal::Ref(word).compare_exchange_weak(expected, desired, std::memory_order_acq_rel);
}
template <typename T>
inline bool CompareExchangeWeakSeqCst(T& word, T& expected, shared_word_internal::Value<T> desired) {
  return shared_word_internal::Ref(word).compare_exchange_weak(expected, desired, std::memory_order_seq_cst);
}

// Raises `word` to `value` unless it already holds at least that (a
// monotonic maximum: heartbeats, high-water marks, hold deadlines). A racer
// that raised it higher wins; the word never goes down.
template <typename T>
inline void RaiseToAcqRel(T& word, shared_word_internal::Value<T> value) {
  T current = LoadAcquire(word);
  while (current < value && !CompareExchangeWeakAcqRel(word, current, value)) {
  }
}
template <typename T>
inline void RaiseToSeqCst(T& word, shared_word_internal::Value<T> value) {
  T current = LoadSeqCst(word);
  while (current < value && !CompareExchangeWeakSeqCst(word, current, value)) {
  }
}

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_SHARED_WORD_H_
