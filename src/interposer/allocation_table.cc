#include "interposer/allocation_table.h"

#include <sys/mman.h>


namespace gpuslice::interposer {
namespace {

uint64_t Mix(uint64_t x) {
  // splitmix64's finaliser: device pointers share their high bits.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t Pack(const AllocationRecord& r) {
  return (r.bytes << 16) | (static_cast<uint64_t>(r.device & 0xff) << 8) | (r.kind & 0xff);
}

AllocationRecord Unpack(uint64_t v) {
  AllocationRecord r;
  r.bytes = v >> 16;
  r.device = static_cast<uint32_t>((v >> 8) & 0xff);
  r.kind = static_cast<uint32_t>(v & 0xff);
  return r;
}

}  // namespace

bool AllocationTable::Init(uint32_t capacity_log2) {
  if (capacity_log2 > kCapacityLog2) capacity_log2 = kCapacityLog2;
  const size_t bytes = sizeof(Entry) << capacity_log2;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  mask_ = (1ull << capacity_log2) - 1;
  entries_ = static_cast<Entry*>(p);  // zero-filled: every entry is empty
  return true;
}

uint64_t AllocationTable::TaggedKey(uint64_t key, AllocationKind kind) {
  // Pointers and handles of different kinds may collide numerically; the kind
  // lives in the top byte, which no x86-64 user address or driver handle uses.
  const uint64_t tagged = (key & 0x00ffffffffffffffull) | (static_cast<uint64_t>(kind) << 56);
  return tagged == 0 || tagged == kTombstone ? tagged ^ 1 : tagged;
}

bool AllocationTable::Insert(uint64_t key, AllocationKind kind, const AllocationRecord& record) {
  if (entries_ == nullptr || record.bytes >= (1ull << 48)) return false;
  const uint64_t k = TaggedKey(key, kind);
  const uint32_t probes = Probes();
  uint64_t i = Mix(k) & mask_;
  for (uint32_t probe = 0; probe < probes; ++probe, i = (i + 1) & mask_) {
    Entry& e = entries_[i];
    uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur != 0 && cur != kTombstone) continue;
    if (!e.key.compare_exchange_strong(cur, k, std::memory_order_acq_rel)) continue;
    AllocationRecord r = record;
    r.kind = static_cast<uint32_t>(kind);
    e.aux.store(r.aux, std::memory_order_relaxed);
    e.value.store(Pack(r), std::memory_order_release);
    return true;
  }
  return false;
}

bool AllocationTable::Erase(uint64_t key, AllocationKind kind, AllocationRecord* record) {
  if (entries_ == nullptr) return false;
  const uint64_t k = TaggedKey(key, kind);
  const uint32_t probes = Probes();
  uint64_t i = Mix(k) & mask_;
  for (uint32_t probe = 0; probe < probes; ++probe, i = (i + 1) & mask_) {
    Entry& e = entries_[i];
    uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur == 0) return false;
    if (cur != k) continue;
    const uint64_t value = e.value.load(std::memory_order_acquire);
    const uint64_t aux = e.aux.load(std::memory_order_acquire);
    // Only one eraser of a key can win; a double free of the same pointer
    // by the app uncharges once.
    if (!e.key.compare_exchange_strong(cur, kTombstone, std::memory_order_acq_rel)) return false;
    *record = Unpack(value);
    record->aux = aux;
    return true;
  }
  return false;
}

AllocationTable::Entry* AllocationTable::FindEntry(uint64_t key, AllocationKind kind) const {
  if (entries_ == nullptr) return nullptr;
  const uint64_t k = TaggedKey(key, kind);
  const uint32_t probes = Probes();
  uint64_t i = Mix(k) & mask_;
  for (uint32_t probe = 0; probe < probes; ++probe, i = (i + 1) & mask_) {
    Entry& e = entries_[i];
    const uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur == 0) return nullptr;
    if (cur == k) return &e;
  }
  return nullptr;
}

bool AllocationTable::Find(uint64_t key, AllocationKind kind, AllocationRecord* record) const {
  const Entry* e = FindEntry(key, kind);
  if (e == nullptr) return false;
  *record = Unpack(e->value.load(std::memory_order_acquire));
  record->aux = e->aux.load(std::memory_order_acquire);
  return true;
}

bool AllocationTable::AdjustCounter(uint64_t key, AllocationKind kind, int field, int delta, uint64_t* aux) {
  Entry* e = FindEntry(key, kind);
  if (e == nullptr) return false;
  const int shift = field == 0 ? 0 : 32;
  uint64_t cur = e->aux.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t count = (cur >> shift) & 0xffffffffull;
    if (delta < 0 && count == 0) return false;
    const uint64_t next = delta < 0 ? cur - (1ull << shift) : cur + (1ull << shift);
    if (e->aux.compare_exchange_weak(cur, next, std::memory_order_acq_rel)) {
      *aux = next;
      return true;
    }
  }
}

void AllocationTable::EraseAll(AllocationKind kind, uint64_t aux,
                               void (*erased)(uint64_t, const AllocationRecord&, void*), void* arg) {
  if (entries_ == nullptr) return;
  for (uint64_t i = 0; i <= mask_; ++i) {
    Entry& e = entries_[i];
    uint64_t cur = e.key.load(std::memory_order_acquire);
    if (cur == 0 || cur == kTombstone || (cur >> 56) != static_cast<uint64_t>(kind)) continue;
    if (e.aux.load(std::memory_order_acquire) != aux) continue;
    const uint64_t value = e.value.load(std::memory_order_acquire);
    if (!e.key.compare_exchange_strong(cur, kTombstone, std::memory_order_acq_rel)) continue;
    AllocationRecord record = Unpack(value);
    record.aux = aux;
    erased(cur & 0x00ffffffffffffffull, record, arg);  // TaggedKey's key bits
  }
}

void AllocationTable::Clear() {
  // Dropping private anonymous pages zero-fills them on next touch, without
  // making the whole table resident as a memset would.
  if (entries_ != nullptr) madvise(entries_, sizeof(Entry) * (mask_ + 1), MADV_DONTNEED);
}

}  // namespace gpuslice::interposer
