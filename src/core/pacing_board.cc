#include "core/pacing_board.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/shared_word.h"

namespace gpuslice::core {
namespace {

// The turn word: everything a reader needs about the turn, changed by one CAS.
//   bits  0..6   holder + 1 (0 = nobody)
//   bit   7      closing: an exclusive turn being handed over (CloseTurn)
//   bits  8..23  sequence (against ABA; also bumped by closing and reopening)
//   bits 24..31  quantum, ms
//   bits 32..63  start, µs (mod 2^32; ages are differences, valid ~71 min)
//
// A caller's `now` may be older than the turn: it read its clock, was
// descheduled (a CPU-starved or throttled container), and meanwhile another
// process began a new turn. Such a turn is brand new to it, age 0, where the
// difference mod 2^32 would make it ~71.6 min old, and the hand-over would
// charge its holder all of that. A start at most kStaleClockUs ahead of
// `now` is read that way: far more than a CFS throttling period (100 ms by
// default) lasts. The price: a turn really 71.6 min old, less under 1 s,
// reads as new for under 1 s (its hand-over waits that long).
constexpr uint32_t kStaleClockUs = 1'000'000;

struct Turn {
  int holder = -1;
  bool closing = false;
  uint32_t sequence = 0;
  uint32_t quantum_ms = 0;
  uint32_t start_us = 0;

  static Turn Decode(uint64_t w) {
    return Turn{static_cast<int>(w & 0x7f) - 1, ((w >> 7) & 1) != 0, static_cast<uint32_t>((w >> 8) & 0xffff),
                static_cast<uint32_t>((w >> 24) & 0xff), static_cast<uint32_t>(w >> 32)};
  }
  uint64_t Encode() const {
    return static_cast<uint64_t>(holder + 1) | (closing ? 1ull << 7 : 0) |
           (static_cast<uint64_t>(sequence & 0xffff) << 8) | (static_cast<uint64_t>(quantum_ms & 0xff) << 24) |
           (static_cast<uint64_t>(start_us) << 32);
  }
  // The same turn, closing or open again, under a new sequence.
  uint64_t Closing(bool closing_now) const {
    Turn t = *this;
    t.closing = closing_now;
    ++t.sequence;
    return t.Encode();
  }
  uint64_t AgeNs(uint64_t now_ns) const {
    const uint32_t age_us = static_cast<uint32_t>(now_ns / 1000) - start_us;
    return age_us > UINT32_MAX - kStaleClockUs ? 0 : static_cast<uint64_t>(age_us) * 1000;
  }
  uint64_t StartNs(uint64_t now_ns) const { return now_ns - AgeNs(now_ns); }
};

// Time from `then` to `now`; 0 when another process stamped `then` with a
// clock read after the caller's `now` (see kStaleClockUs).
uint64_t Since(uint64_t now, uint64_t then) { return now > then ? now - then : 0; }

// Processes of the member with work queued (the count may be -1 for a
// moment: see NoteBusy).
bool Busy(BoardMember& m) { return static_cast<int32_t>(LoadAcquire(m.busy_processes)) > 0; }

// What a row claims of its vGPU, as this process may believe it: the trust's
// (PacingConfig::trust) when there is one, else the row's own words. A row
// the trust does not list claims nothing: it is not `Known`, and everything
// below skips it.
bool Known(BoardMember& m, const PacingConfig& c) {
  TrustedMember unused;
  return c.trust == nullptr || c.trust->Find(LoadAcquire(m.vgpu_id), &unused);
}
TrustedMember ClaimOf(BoardMember& m, const PacingConfig& c) {
  TrustedMember t;
  if (c.trust != nullptr) {
    if (!c.trust->Find(LoadAcquire(m.vgpu_id), &t)) t = TrustedMember{LevelWord(Priority::kBestEffort, 0), 1, 0};
    return t;
  }
  return TrustedMember{LoadAcquire(m.priority), LoadAcquire(m.weight), LoadAcquire(m.cap_pct)};
}
uint32_t LevelOf(BoardMember& m, const PacingConfig& c) { return ClaimOf(m, c).level; }
uint32_t WeightOf(BoardMember& m, const PacingConfig& c) { return ClaimOf(m, c).weight; }
uint32_t CapOf(BoardMember& m, const PacingConfig& c) { return ClaimOf(m, c).cap_pct; }

bool Alive(BoardMember& m, uint64_t now, const PacingConfig& c) {
  return LoadAcquire(m.vgpu_id) != 0 && LoadAcquire(m.heartbeat_ns) + c.member_timeout_ns > now && Known(m, c);
}

bool IsLc(BoardMember& m, const PacingConfig& c) { return LevelClass(LevelOf(m, c)) == Priority::kLatencyCritical; }
// Takes part in GPU turns: every best-effort member, and a latency-critical
// one with a cap, whose turns are the GPU time its cap is charged (it wins
// them by its level, and so waits only for its cap's tokens).
bool TakesTurns(BoardMember& m, const PacingConfig& c) {
  const TrustedMember claim = ClaimOf(m, c);
  return LevelClass(claim.level) != Priority::kLatencyCritical || claim.cap_pct != 0;
}
uint32_t Order(BoardMember& m, const PacingConfig& c) { return LevelOrder(LevelOf(m, c)); }

// The level a member competes for turns at, `at` a time: its own, or above
// every level once it has gone level_starvation_ns without a turn. A holder
// is judged at its turn's start, so that a turn won that way is not taken
// back by the levels it was starved by.
uint32_t TurnOrder(BoardMember& m, uint64_t at, const PacingConfig& c) {
  const uint64_t ended = LoadAcquire(m.turn_ended_ns);
  return at > ended && at - ended >= c.level_starvation_ns ? LevelOrder(~0u) + 1 : Order(m, c);
}

// Wants the GPU: one of its launches waited at the gate lately or, under
// backfill turns, launched outside its turn lately or still has work queued
// (a backfiller blocked behind the holder's work launches nothing more; it
// must still get its turn).
bool Demanding(BoardMember& m, uint64_t now, const PacingConfig& c) {
  if (!Alive(m, now, c) || !TakesTurns(m, c)) return false;
  return LoadAcquire(m.demand_ns) + c.demand_window_ns > now || (c.backfill && Busy(m));
}

// Tokens a capped member has at `now`, before what it uses in a running
// turn: what it had when last charged, or when its turn began (SwitchTurn
// rebases them), and what its cap has earned since. `banked`: at most
// cap_burst_ns, for a member waiting for a turn, whose idle time must not
// bank credit. A holder's tokens are not bounded during its turn: what its
// cap earns while it runs pays for that turn (bounded, a turn of 210 ms at
// 30% lost 60 ms of its earnings: 26.1% instead of 27.8% on the board's
// simulation, with 20 ms kernels queued 16 deep).
int64_t CapTokens(BoardMember& m, uint64_t now, const PacingConfig& c, bool banked = true) {
  const uint32_t cap = CapOf(m, c);
  if (cap == 0) return INT64_MAX;
  const uint64_t stamp = LoadAcquire(m.cap_stamp_ns);
  const uint64_t since = now > stamp ? now - stamp : 0;
  const int64_t t = LoadAcquire(m.cap_tokens_ns) + static_cast<int64_t>(since / 100 * cap);
  return !banked || t < static_cast<int64_t>(c.cap_burst_ns) ? t : static_cast<int64_t>(c.cap_burst_ns);
}

// May keep running after `used_ns` of its current turn.
bool CapAllowsMore(BoardMember& m, uint64_t now, uint64_t used_ns, const PacingConfig& c) {
  return CapOf(m, c) == 0 || CapTokens(m, now, c, /*banked=*/false) - static_cast<int64_t>(used_ns) > 0;
}
// May start a turn (enough tokens for a useful one, after `pending_ns` not
// yet charged).
bool CapAllowsTurn(BoardMember& m, uint64_t now, uint64_t pending_ns, const PacingConfig& c) {
  return CapOf(m, c) == 0 ||
         CapTokens(m, now, c) - static_cast<int64_t>(pending_ns) >= static_cast<int64_t>(c.min_quantum_ns);
}

uint64_t Scaled(uint64_t ns, uint32_t weight) { return ns * 100 / (weight == 0 ? 100 : weight); }

void Charge(BoardMember& m, uint64_t ns, uint64_t now, const PacingConfig& c) {
  FetchAddRelaxed(m.charged_ns, ns);
  FetchAddRelaxed(m.vtime, Scaled(ns, WeightOf(m, c)));
  if (CapOf(m, c) != 0) {
    const int64_t left = CapTokens(m, now, c, /*banked=*/false) - static_cast<int64_t>(ns);
    StoreRelaxed(m.cap_tokens_ns,
                 left < static_cast<int64_t>(c.cap_burst_ns) ? left : static_cast<int64_t>(c.cap_burst_ns));
    StoreRelease(m.cap_stamp_ns, now);
  }
}

// A capped member's turn begins: its tokens from here on are what it has
// banked (at most the burst) and what its cap earns while it runs.
void RebaseTokens(BoardMember& m, uint64_t now, const PacingConfig& c) {
  if (CapOf(m, c) == 0) return;
  StoreRelaxed(m.cap_tokens_ns, CapTokens(m, now, c));
  StoreRelease(m.cap_stamp_ns, now);
}

// GPU time a capped member owes for work it queued in its last turn that
// ran on after the turn passed without its drain (AdvanceTurn's drain
// timeout): from the turn's end to its drain, or to now while that work
// still runs. Nothing else keeps a capped member busy outside its turns: it
// launches in its own turns only. Without it, a job that queues more than
// the timeout's worth of work per turn (long kernels, or long steps queued
// ahead) ran most of it uncharged: 91% under a 30% cap, with 800 ms
// queues, on the board's simulation. While the member's processes tick,
// the one with work queued charges it as it goes (ChargeRunOn), so what is
// left here is since its last tick. At most member_timeout_ns: a busy mark
// nobody vouches for may be a dead process's (NoteBusy), whose queue no cap
// can charge, and the vGPU must still get turns.
uint64_t Overrun(BoardMember& m, uint64_t now, const PacingConfig& c) {
  if (LoadAcquire(m.ran_on) == 0 || CapOf(m, c) == 0) return 0;
  const uint64_t ended = LoadAcquire(m.turn_ended_ns);
  const uint64_t until = Busy(m) ? now : LoadAcquire(m.drained_ns);
  const uint64_t owed = until > ended ? until - ended : 0;
  return owed < c.member_timeout_ns ? owed : c.member_timeout_ns;
}

// Charges the run-on from `ended` (the member's turn_ended_ns, as read) to
// `until` once: whoever moves turn_ended_ns from one to the other charges
// it. The member's work ran until then, so its turn, for TurnOrder's
// starvation clock, ended then too. False if another moved it first.
bool ClaimRunOn(BoardMember& m, uint64_t ended, uint64_t until, uint64_t now, const PacingConfig& c) {
  if (until <= ended) return true;
  if (!CompareExchangeAcqRel(m.turn_ended_ns, ended, until)) return false;
  const uint64_t owed = until - ended;
  Charge(m, owed < c.member_timeout_ns ? owed : c.member_timeout_ns, now, c);
  return true;
}

// Ends a run-on, once, by whoever clears `ran_on` first: once it has
// drained (Best), or when its next turn starts. Charged, its tokens may go
// below zero, which the cap's earnings pay back; left pending, a debt over
// the burst could never be met, and the vGPU would get no turn again.
void SettleOverrun(BoardMember& m, uint64_t now, const PacingConfig& c) {
  uint32_t expected = 1;
  if (LoadAcquire(m.ran_on) == 0 || !CompareExchangeAcqRel(m.ran_on, expected, 0u) || CapOf(m, c) == 0) return;
  while (!ClaimRunOn(m, LoadAcquire(m.turn_ended_ns), Busy(m) ? now : LoadAcquire(m.drained_ns), now, c)) {
  }
}

bool OtherDemand(Board* b, int member, uint64_t now, const PacingConfig& c) {
  for (int i = 0; i < kBoardMembers; ++i) {
    if (i != member && Demanding(b->members[i], now, c)) return true;
  }
  return false;
}

// Some waiting member is owed the GPU more than `holder`, whose turn has run
// `age` so far.
// A waiter of a higher level outruns the holder at once; one of its own level
// by virtual time.
bool Outrun(Board* b, int holder, uint64_t age, uint64_t now, const PacingConfig& c) {
  BoardMember& h = b->members[holder];
  const uint32_t order = TurnOrder(h, now - age, c);
  const uint64_t v = LoadAcquire(h.vtime) + Scaled(age, WeightOf(h, c));
  for (int i = 0; i < kBoardMembers; ++i) {
    BoardMember& m = b->members[i];
    if (i == holder || !Demanding(m, now, c) || !CapAllowsTurn(m, now, 0, c)) continue;
    const uint32_t m_order = TurnOrder(m, now, c);
    if (m_order > order) return true;
    if (m_order == order && LoadAcquire(m.vtime) + Scaled(c.preempt_lead_ns, WeightOf(h, c)) < v) return true;
  }
  return false;
}

// GPU time a holder used in a turn that started at `start`: up to now while
// it has work queued, else up to its last drain or launch. Time it held the
// turn idle (nobody else wanted the GPU) is not charged: that would bank a
// debt that starves it later.
uint64_t UsedSince(BoardMember& h, uint64_t start, uint64_t now) {
  if (Busy(h)) return now - start;
  uint64_t end = LoadAcquire(h.drained_ns) > LoadAcquire(h.last_launch_ns) ? LoadAcquire(h.drained_ns)
                                                                         : LoadAcquire(h.last_launch_ns);
  if (end > now) end = now;
  return end > start ? end - start : 0;
}

// The holder is owed GPU time: every waiter of its level has run further
// ahead, and none is of a higher level.
bool Owed(Board* b, int holder, uint64_t age, uint64_t now, const PacingConfig& c) {
  BoardMember& h = b->members[holder];
  const uint32_t order = TurnOrder(h, now - age, c);
  const uint64_t v = LoadAcquire(h.vtime) + Scaled(age, WeightOf(h, c));
  for (int i = 0; i < kBoardMembers; ++i) {
    BoardMember& m = b->members[i];
    if (i == holder || !Demanding(m, now, c)) continue;
    const uint32_t m_order = TurnOrder(m, now, c);
    if (m_order > order || (m_order == order && LoadAcquire(m.vtime) <= v)) return false;
  }
  return true;
}

// Whether `m`'s turns are exclusive: under exclusive turns all are; under
// backfill turns a capped member's (its time outside its turns would escape
// the cap).
bool ExclusiveFor(BoardMember& m, const PacingConfig& c) { return !c.backfill || CapOf(m, c) != 0; }

// Closes an exclusive turn whose holder `h` was seen drained, before it is
// handed over. A launch of the holder's marks its vGPU busy (NoteBusy) and
// only then looks whether the turn is still open and its own (LaunchMayGo);
// the closer closes the turn and only then looks whether the holder is
// still drained. Both are sequentially consistent, so one of the two sees
// the other: the launch waits, or the turn is reopened and stays until
// that launch's work has drained. Without the close, a launch that passed
// the gate, its thread then descheduled while the holder drained and the
// turn passed, reached the GPU in the next holder's exclusive turn
// (verification/gate.pml). Returns whether the turn may pass now; `*seen`
// is then the closed word.
bool CloseTurn(Board* b, BoardMember& h, uint64_t* seen) {
  const Turn t = Turn::Decode(*seen);
  if (!t.closing) {
    uint64_t expected = *seen;
    const uint64_t closed = t.Closing(true);
    if (!CompareExchangeSeqCst(b->turn, expected, closed)) return false;
    *seen = closed;
  }
  if (static_cast<int32_t>(LoadSeqCst(h.busy_processes)) <= 0) return true;
  uint64_t expected = *seen;
  CompareExchangeSeqCst(b->turn, expected, Turn::Decode(*seen).Closing(false));
  return false;
}

uint32_t QuantumMs(const PacingConfig& c) {
  const uint64_t ms = c.quantum_ns / 1'000'000;
  return static_cast<uint32_t>(ms == 0 ? 1 : ms > 255 ? 255 : ms);
}

// A turn's quantum: what its word says, but never more than the node's
// (every honest turn is given the node's). The word is the board's, which
// any tenant can write: a turn forged with the longest quantum the word
// holds (255 ms) and a busy mark kept the neighbours of a forger that had
// died out for that long and the drain timeout after.
uint64_t QuantumNs(const Turn& t, const PacingConfig& c) {
  return static_cast<uint64_t>(std::min(t.quantum_ms, QuantumMs(c))) * 1'000'000;
}

// The holder's turn is over: quantum spent, cap spent, or outrun.
bool TurnOver(Board* b, int holder, const Turn& t, uint64_t now, const PacingConfig& c) {
  const uint64_t age = t.AgeNs(now);
  return age >= QuantumNs(t, c) || !CapAllowsMore(b->members[holder], now, age, c) || Outrun(b, holder, age, now, c);
}

// Of the demanding members of the highest turn order, the one with the
// least virtual time, `extra` counted as demanding too and `holder` with
// `holder_pending` ns not yet charged; -1 if none may run. Ties go to the
// member after the holder (round robin).
int Best(Board* b, uint64_t now, int extra, int holder, uint64_t holder_pending, const PacingConfig& c) {
  int best = -1;
  uint32_t best_order = 0;
  uint64_t best_vtime = UINT64_MAX;
  for (int k = 1; k <= kBoardMembers; ++k) {
    const int i = ((holder < 0 ? -1 : holder) + k + kBoardMembers) % kBoardMembers;
    BoardMember& m = b->members[i];
    if (i == extra ? !(Alive(m, now, c) && TakesTurns(m, c)) : !Demanding(m, now, c)) continue;
    if (i != holder && !Busy(m)) SettleOverrun(m, now, c);
    const uint64_t pending = i == holder ? holder_pending : Overrun(m, now, c);
    if (!CapAllowsTurn(m, now, pending, c)) continue;
    const uint64_t v = LoadAcquire(m.vtime) + Scaled(pending, WeightOf(m, c));
    // The holder has just had a turn: its own level.
    const uint32_t order = i == holder ? Order(m, c) : TurnOrder(m, now, c);
    if (best < 0 || order > best_order || (order == best_order && v < best_vtime)) {
      best = i;
      best_order = order;
      best_vtime = v;
    }
  }
  return best;
}

// Replaces turn `seen` by one for `next` starting now; the winner charges the
// old holder `charge_ns`. Returns whether this caller won.
bool SwitchTurn(Board* b, uint64_t seen, int next, uint64_t charge_ns, uint64_t now, const PacingConfig& c) {
  const Turn old = Turn::Decode(seen);
  Turn t;
  t.holder = next;
  t.sequence = old.sequence + 1;
  t.quantum_ms = next >= 0 ? QuantumMs(c) : 0;
  t.start_us = static_cast<uint32_t>(now / 1000);
  if (!CompareExchangeAcqRel(b->turn, seen, t.Encode())) return false;
  if (old.holder >= 0) {
    Charge(b->members[old.holder], charge_ns, now, c);
    RaiseToAcqRel(b->members[old.holder].turn_ended_ns, now);
  }
  if (next >= 0) {
    SettleOverrun(b->members[next], now, c);
    RebaseTokens(b->members[next], now, c);
    RaiseToAcqRel(b->vclock, LoadAcquire(b->members[next].vtime));
    FetchAddRelaxed(b->members[next].turns, 1);
  }
  return true;
}

}  // namespace

std::string BoardFileName(const uint8_t uuid[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "gpu-";
  for (int i = 0; i < 16; ++i) {
    name += kHex[uuid[i] >> 4];
    name += kHex[uuid[i] & 15];
  }
  return name;
}

uint64_t VgpuIdOf(const std::string& name, uint64_t limits_inode) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  h ^= limits_inode * 0x9e3779b97f4a7c15ull;
  return h | 1;
}

void InitBoard(Board* board) {
  memset(static_cast<void*>(board), 0, sizeof(Board));
  board->header = {kBoardMagic, kBoardVersion, sizeof(Board)};
}

Status ValidateBoard(const Board& board, const std::string& path) {
  if (board.header.magic != kBoardMagic || board.header.version != kBoardVersion ||
      board.header.size != sizeof(Board)) {
    return Status::Error("pacing board " + path + " is not a version " + std::to_string(kBoardVersion) +
                         " board; remove it (the next `gpuslice run` or the daemon recreates it)");
  }
  return Status::Ok();
}

bool IsCurrentBoard(int fd) {
  struct stat st {};
  FileHeader header{};
  return fstat(fd, &st) == 0 && st.st_size == static_cast<off_t>(sizeof(Board)) &&
         pread(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) && header.magic == kBoardMagic &&
         header.version == kBoardVersion && header.size == sizeof(Board);
}

int JoinBoard(Board* b, uint64_t vgpu_id, const MemberSpec& spec, uint64_t now) {
  const PacingConfig c;
  for (int i = 0; i < kBoardMembers; ++i) {
    if (LoadAcquire(b->members[i].vgpu_id) == vgpu_id && Alive(b->members[i], now, c)) {
      Heartbeat(b, i, spec, now);
      return i;
    }
  }
  for (int i = 0; i < kBoardMembers; ++i) {
    BoardMember& m = b->members[i];
    // Free, or left behind by a vGPU whose processes are all gone: nobody
    // has heartbeat it for member_timeout_ns. It is claimed by moving its
    // heartbeat to now (a racing claimer's CAS fails), and only then given
    // our id, so an entry just claimed looks taken at once. (Taking the id
    // first let a second joiner see the new id beside the old heartbeat,
    // judge the entry dead and take it too: two vGPUs on one entry, neither
    // paced.) A late heartbeat of the old owner cannot revive it: the id no
    // longer matches. An entry given back below is reusable after the timeout;
    // one never beaten (0) at once.
    uint64_t beat = LoadAcquire(m.heartbeat_ns);
    if (beat != 0 && beat + c.member_timeout_ns > now) continue;
    // The floor first: a hand-over that sees the claimed heartbeat below
    // then sees this floor too, and charges the old owner's turn to nobody
    // (AdvanceTurn). Raising a dead row's floor is harmless if the claim is lost.
    RaiseToAcqRel(m.turn_ended_ns, now);
    if (!CompareExchangeAcqRel(m.heartbeat_ns, beat, now)) continue;
    StoreRelease(m.vgpu_id, vgpu_id);
    StoreRelaxed(m.busy_processes, 0);
    StoreRelaxed(m.demand_ns, 0);
    StoreRelaxed(m.last_launch_ns, 0);
    StoreRelaxed(m.drained_ns, now);
    StoreRelaxed(m.charged_ns, 0);
    StoreRelaxed(m.turns, 0);
    StoreRelaxed(m.vtime, LoadAcquire(b->vclock));
    StoreRelaxed(m.cap_tokens_ns, static_cast<int64_t>(c.cap_burst_ns));
    StoreRelaxed(m.cap_stamp_ns, now);
    StoreRelaxed(m.hold_until_ns, 0);
    StoreRelaxed(m.lc_burst_start_ns, 0);
    StoreRelaxed(m.lc_linger_us, 0);
    StoreRelaxed(m.ran_on, 0);
    StoreRelaxed(m.turn_ended_ns, now);
    Heartbeat(b, i, spec, now);
    // Two processes of one vGPU may have claimed two entries at once: the
    // lower one wins, the other is given back.
    for (int j = 0; j < i; ++j) {
      if (LoadAcquire(b->members[j].vgpu_id) == vgpu_id && Alive(b->members[j], now, c)) {
        StoreRelease(m.vgpu_id, 0);
        return j;
      }
    }
    return i;
  }
  return -1;
}

void Heartbeat(Board* b, int member, const MemberSpec& spec, uint64_t now) {
  BoardMember& m = b->members[member];
  StoreRelaxed(m.weight, spec.weight == 0 ? 100 : spec.weight > 100 ? 100 : spec.weight);
  StoreRelaxed(m.cap_pct, spec.cap_pct > 100 ? 100 : spec.cap_pct);
  StoreRelaxed(m.priority, LevelWord(spec.priority, spec.rank));
  RaiseToAcqRel(m.heartbeat_ns, now);
}

bool OthersLive(const Board& board, int member, uint64_t now, const PacingConfig& c) {
  Board* b = const_cast<Board*>(&board);
  for (int i = 0; i < kBoardMembers; ++i) {
    if (i != member && Alive(b->members[i], now, c)) return true;
  }
  return false;
}

bool PacingNeeded(const Board& board, int member, uint64_t now, const PacingConfig& c) {
  BoardMember& me = const_cast<Board&>(board).members[member];
  if (CapOf(me, c) != 0) return true;
  if (IsLc(me, c)) return HigherLatencyCriticalLive(board, member, now, c);
  return OthersLive(board, member, now, c);
}

void HoldBestEffort(Board* b, int member, uint64_t until, uint64_t now) {
  if (until > now + kMaxHoldNs) until = now + kMaxHoldNs;
  RaiseToAcqRel(b->members[member].hold_until_ns, until);
}

void ReleaseHold(Board* b, int member, uint64_t now) {
  uint64_t& hold = b->members[member].hold_until_ns;
  uint64_t cur = LoadAcquire(hold);
  while (cur > now && !CompareExchangeWeakAcqRel(hold, cur, now)) {
  }
}

void NoteLcLaunch(Board* b, int member, uint32_t linger_us, uint64_t now) {
  BoardMember& m = b->members[member];
  if (linger_us > kMaxLingerUs) linger_us = kMaxLingerUs;
  const uint64_t last = LoadAcquire(m.last_launch_ns);
  if (last + static_cast<uint64_t>(LoadAcquire(m.lc_linger_us)) * 1000 < now) {
    StoreRelaxed(m.lc_burst_start_ns, now);
  }
  StoreRelaxed(m.lc_linger_us, linger_us);
  RaiseToAcqRel(m.last_launch_ns, now);
}

namespace {
// The member's automatic hold is on at `now`. The words are read without a
// common snapshot: a torn read costs at most one wrong decision of one gate
// check, never an unbounded hold (every term is bounded by `now`).
bool AutoHolding(BoardMember& m, uint64_t now) {
  const uint64_t linger_ns = static_cast<uint64_t>(LoadAcquire(m.lc_linger_us)) * 1000;
  if (linger_ns == 0) return false;
  const uint64_t last = LoadAcquire(m.last_launch_ns);
  const uint64_t burst = LoadAcquire(m.lc_burst_start_ns);
  return last <= now && now < last + linger_ns && burst <= now && now - burst < kMaxAutoHoldNs;
}
}  // namespace

bool LaunchesHeld(const Board& board, int member, uint64_t now, bool auto_hold, const PacingConfig& c) {
  Board* b = const_cast<Board*>(&board);
  const uint32_t order = Order(b->members[member], c);
  for (int i = 0; i < kBoardMembers; ++i) {
    BoardMember& m = b->members[i];
    if (LoadAcquire(m.vgpu_id) == 0 || !IsLc(m, c) || Order(m, c) <= order || !Alive(m, now, c)) continue;
    // A capped LC that has spent its tokens waits for them; holding others
    // meanwhile would leave the GPU idle (its span may last kMaxHoldNs).
    if (!CapAllowsMore(m, now, 0, c)) continue;
    const uint64_t until = LoadAcquire(m.hold_until_ns);
    if (until > now && until <= now + kMaxHoldNs) return true;
    if (auto_hold && AutoHolding(m, now)) return true;
  }
  return false;
}

bool HigherLatencyCriticalLive(const Board& board, int member, uint64_t now, const PacingConfig& c) {
  Board* b = const_cast<Board*>(&board);
  const uint32_t order = Order(b->members[member], c);
  // Other rows count as they are written, roster or not: a short slice of
  // one's own is the safe direction, so LC protection never waits for a
  // roster to list a new LC vGPU (or for a schedule that lost one). A
  // forged LC row so shortens a victim's slices, which costs it no more than
  // a tenant can take anyway by setting its own channel groups' slices
  // through the RM ioctl (docs/design.md, "Forged board entries").
  const PacingConfig as_written;
  for (int i = 0; i < kBoardMembers; ++i) {
    BoardMember& m = b->members[i];
    if (i != member && IsLc(m, as_written) && Order(m, as_written) > order && Alive(m, now, as_written)) {
      return true;
    }
  }
  return false;
}

bool OtherBestEffortBusy(const Board& board, int member, uint64_t now, const PacingConfig& c) {
  Board* b = const_cast<Board*>(&board);
  for (int i = 0; i < kBoardMembers; ++i) {
    BoardMember& m = b->members[i];
    if (i != member && !IsLc(m, c) && Alive(m, now, c) && LoadAcquire(m.busy_processes) > 0) return true;
  }
  return false;
}

void NoteWaiting(Board* b, int member, uint64_t now, const PacingConfig& c) {
  BoardMember& m = b->members[member];
  // Back from a real idle (not a pause between steps): start at the virtual
  // clock, so time spent idle is not credit to be spent hogging the GPU.
  // Time its work ran on the GPU is no idle: a job that waited for a long
  // queue to drain comes back at its drain, and owes what ran after its
  // turn (Overrun, which counts from the turn's end).
  uint64_t active = LoadAcquire(m.demand_ns) > LoadAcquire(m.last_launch_ns) ? LoadAcquire(m.demand_ns)
                                                                             : LoadAcquire(m.last_launch_ns);
  if (LoadAcquire(m.drained_ns) > active) active = LoadAcquire(m.drained_ns);
  // Nor is it time without a turn (TurnOrder).
  if (!Busy(m) && active + c.idle_reset_ns <= now) {
    RaiseToAcqRel(m.vtime, LoadAcquire(b->vclock));
    RaiseToAcqRel(m.turn_ended_ns, now);
  }
  RaiseToAcqRel(m.demand_ns, now);
}

void NoteLaunch(Board* b, int member, uint64_t now) { RaiseToAcqRel(b->members[member].last_launch_ns, now); }

void NoteBusy(Board* b, int member, bool busy, uint64_t now) {
  BoardMember& m = b->members[member];
  // Each process reports each change of its busy mark once, but two of its
  // threads may report two changes in the wrong order: a drain seen by its
  // compute thread can arrive before the launch (on a thread descheduled
  // in between) that made it busy. The count then passes through -1 and
  // comes back to 0; had the drain been dropped at 0, the count would stay
  // 1 for ever, and every turn of the vGPU would last until the drain
  // timeout, charged in full. (A process killed between the two leaves -1
  // behind, read as 0, until the entry is claimed again.)
  // Sequentially consistent: a launch's mark and a hand-over's close are
  // each followed by a look at the other (LaunchMayGo, AdvanceTurn).
  const uint32_t before = FetchAddSeqCst(m.busy_processes, busy ? 1u : ~0u);
  if (static_cast<int32_t>(before) + (busy ? 1 : -1) == 0) RaiseToAcqRel(m.drained_ns, now);
}

void ChargeRunOn(Board* b, int member, uint64_t now, const PacingConfig& c) {
  BoardMember& m = b->members[member];
  // The end is read first: a turn that starts after this read settles the
  // run-on up to its start (SwitchTurn), which moves the end, and the
  // claim below then fails rather than charge the new turn's time.
  const uint64_t ended = LoadAcquire(m.turn_ended_ns);
  if (LoadAcquire(m.ran_on) == 0 || CapOf(m, c) == 0 || TurnHolder(*b) == member) return;
  ClaimRunOn(m, ended, Busy(m) ? now : LoadAcquire(m.drained_ns), now, c);
}

bool WaitsForOwnCap(const Board& board, int member, uint64_t now, const PacingConfig& c) {
  BoardMember& m = const_cast<Board&>(board).members[member];
  return CapOf(m, c) != 0 && TurnHolder(board) != member && !CapAllowsTurn(m, now, Overrun(m, now, c), c);
}

void AdvanceTurn(Board* b, uint64_t now, const PacingConfig& c) {
  uint64_t seen = LoadSeqCst(b->turn);
  const Turn t = Turn::Decode(seen);
  if (t.holder < 0) {
    const int next = Best(b, now, -1, -1, 0, c);
    if (next >= 0) SwitchTurn(b, seen, next, 0, now, c);
    return;
  }
  BoardMember& h = b->members[t.holder];
  // A closing turn (see CloseTurn) is finished by whoever sees it, so that
  // a closer that died half-way holds up nobody: reopened below whenever
  // the holder keeps it, else handed over.
  const auto keep = [&] {
    uint64_t expected = seen;
    if (t.closing) CompareExchangeSeqCst(b->turn, expected, t.Closing(false));
  };
  // The outgoing holder is charged only while its heartbeat is fresh. A row
  // whose heartbeat is older than half the member timeout may be its dead
  // vGPU's, about to be claimed by a newcomer (JoinBoard), and the charge
  // lands after the CAS below: charged to the newcomer, it would start its
  // life owing a dead vGPU's turn. A process that stalls for less than half
  // the timeout between here and its charge cannot meet a claim
  // (verification/handover.pml). The heartbeat is read before the floor,
  // which JoinBoard raises before it claims the heartbeat.
  const bool fresh = LoadAcquire(h.heartbeat_ns) + c.member_timeout_ns / 2 > now;
  uint64_t age = t.AgeNs(now);
  uint64_t start = t.StartNs(now);
  // A turn that began before its holder's last turn ended or its row was
  // (re)claimed (JoinBoard sets turn_ended_ns) is not all its own: the row
  // may be a dead holder's, taken over by a newcomer while nobody was paced
  // to pass the turn on. Only what follows is charged (the newcomer was
  // charged the dead holder's whole turn, tens of seconds, and starved). A
  // floor past `now` is a claim made since this call read the clock:
  // nothing of the turn is the newcomer's yet.
  if (const uint64_t floor = LoadAcquire(h.turn_ended_ns); floor > start) {
    age = floor <= now ? age - (floor - start) : 0;
    start = floor <= now ? floor : now;
  }
  uint64_t charge = age;
  bool ran_on = false;  // a capped holder passed over at the drain timeout
  if (Alive(h, now, c) && TakesTurns(h, c)) {
    const bool drained = !Busy(h);
    // Idle since its last launch or drain, whichever came later (a training
    // launches a step at once, then waits for it), but not before its turn.
    uint64_t last = LoadAcquire(h.last_launch_ns) > start ? LoadAcquire(h.last_launch_ns) : start;
    if (LoadAcquire(h.drained_ns) > last) last = LoadAcquire(h.drained_ns);
    const bool idle = drained && (Since(now, last) >= c.long_idle_ns ||
                                  (Since(now, last) >= c.idle_handover_ns && !Owed(b, t.holder, age, now, c)));
    const bool capped_out = !CapAllowsMore(h, now, age, c);
    if (!idle && !TurnOver(b, t.holder, t, now, c)) return keep();
    if (!capped_out && !OtherDemand(b, t.holder, now, c)) return keep();  // it keeps the GPU
    // Exclusive turns pass only once the holder has drained: the GPU is
    // never shared, so the turn up to the drain is the holder's GPU time.
    // A backfill turn passes now; what the holder still has queued runs at
    // its short slice from here on, as any backfiller's does. A capped
    // holder's turns stay exclusive: its time is what the cap counts.
    const bool wait_for_drain = ExclusiveFor(h, c);
    if (wait_for_drain && !drained && age < QuantumNs(t, c) + c.drain_timeout_ns) {
      return keep();
    }
    // Drained, but a launch of the holder's may have passed the gate and
    // not yet reached the GPU: the turn closes first, and passes only if
    // the holder is still drained after that (CloseTurn).
    if (wait_for_drain && drained && !CloseTurn(b, h, &seen)) return;
    charge = UsedSince(h, start, now);
    ran_on = !drained && CapOf(h, c) != 0;
  }
  // A holder that launched lately still wants the GPU though it never
  // waited: it competes for the next turn like a waiter.
  const uint64_t active_at = LoadAcquire(h.last_launch_ns) > LoadAcquire(h.drained_ns) ? LoadAcquire(h.last_launch_ns)
                                                                                        : LoadAcquire(h.drained_ns);
  const bool holder_active =
      Alive(h, now, c) && TakesTurns(h, c) && (Busy(h) || Since(now, active_at) < c.long_idle_ns);
  if (!fresh) charge = 0;
  const int next = Best(b, now, holder_active ? t.holder : -1, t.holder, charge, c);
  if (SwitchTurn(b, seen, next, charge, now, c) && ran_on && next != t.holder) StoreRelease(h.ran_on, 1u);
}

namespace {
// A launch of `member`, which does not hold the turn, under the turn mode.
GateDecision Backfill(Board* b, int member, uint64_t now, const PacingConfig& c) {
  BoardMember& me = b->members[member];
  if (ExclusiveFor(me, c)) return GateDecision::kWait;
  // Demanding: the holder's turn ends at its quantum, and this member is
  // among those the next holder is chosen from. Stamped at most every
  // quarter demand window, to keep the shared line quiet.
  if (LoadAcquire(me.demand_ns) + c.demand_window_ns / 4 <= now) NoteWaiting(b, member, now, c);
  return GateDecision::kGo;
}
}  // namespace

GateDecision TryEnter(Board* b, int member, uint64_t now, const PacingConfig& c, uint64_t waited_ns, bool obey_holds) {
  BoardMember& me = b->members[member];
  if (obey_holds && LaunchesHeld(*b, member, now, waited_ns < kMaxAutoHoldNs, c)) return GateDecision::kWait;
  if (!TakesTurns(me, c)) return GateDecision::kGo;
  for (int attempt = 0; attempt < 3; ++attempt) {
    AdvanceTurn(b, now, c);
    const uint64_t seen = LoadAcquire(b->turn);
    const Turn t = Turn::Decode(seen);
    if (t.holder == member) {
      if (t.closing) return GateDecision::kWait;  // being handed over, or about to be reopened
      const uint64_t age = t.AgeNs(now);
      if (!TurnOver(b, member, t, now, c)) return GateDecision::kGo;
      if (!CapAllowsMore(me, now, age, c)) return GateDecision::kWait;
      if (OtherDemand(b, member, now, c)) return Backfill(b, member, now, c);  // the turn is passing
      // Quantum over and nobody else wants the GPU: a new turn, same holder.
      if (SwitchTurn(b, seen, member, UsedSince(me, t.StartNs(now), now), now, c)) return GateDecision::kGo;
      continue;
    }
    if (t.holder < 0) {
      if (Best(b, now, member, -1, 0, c) != member) return Backfill(b, member, now, c);
      if (SwitchTurn(b, seen, member, 0, now, c)) return GateDecision::kGo;
      continue;
    }
    return Backfill(b, member, now, c);
  }
  return Backfill(b, member, now, c);
}

bool LaunchMayGo(Board* b, int member, const PacingConfig& c) {
  const TrustedMember claim = ClaimOf(b->members[member], c);  // once: this is on every paced launch
  if (claim.cap_pct == 0 && (LevelClass(claim.level) == Priority::kLatencyCritical || c.backfill)) return true;
  const Turn t = Turn::Decode(LoadSeqCst(b->turn));
  return t.holder == member && !t.closing;
}

int TurnHolder(const Board& board) {
  return Turn::Decode(LoadSeqCst(board.turn)).holder;
}

bool CappedTurnHeldByOther(const Board& board, int member, uint64_t now, const PacingConfig& c) {
  const int holder = TurnHolder(board);
  if (holder < 0 || holder >= kBoardMembers || holder == member) return false;
  BoardMember& m = const_cast<Board*>(&board)->members[holder];
  return Alive(m, now, c) && CapOf(m, c) != 0;
}

}  // namespace gpuslice::core
