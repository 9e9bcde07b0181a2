// pacing_board.h — GPU turns for compute shares and hard caps: one board per
// GPU, shared by every vGPU process that uses the GPU.
//
// Why a second mechanism beside hardware timeslices (src/policy): slices set
// shares only between channel groups that never run dry. A PyTorch training
// does run dry (host work between launches, a synchronisation each step),
// every gap ends its turn early, and two trainings with slices 3000/7000 µs
// split an H200 50/50 (docs/benchmarks.md). So while vGPUs contend, they take
// *exclusive turns* at launching work, and each is charged the GPU time its
// turns really took:
//
//   - The holder of the turn launches freely. Other paced vGPUs' launches wait
//     at the gate (interposer/pacer.h) and mark their vGPU as demanding.
//   - A turn lasts one quantum (10 ms). When it ends and another vGPU demands
//     (or the holder's cap is spent), the holder's launches wait too, its
//     queued work drains, and only then is the turn handed over: the GPU is
//     never shared between two paced vGPUs, so a turn's length, from its start
//     to the holder's drain, *is* the holder's GPU time. Nothing is estimated.
//   - The next holder is the demanding vGPU with the least virtual time
//     (charged GPU time / share): start-time fair queueing, so shares come
//     out proportional and work-conserving. A vGPU that becomes active takes
//     the current virtual clock, so idle time does not bank credit.
//   - A holder that has drained and stopped launching gives the turn away
//     early (idle hand-over), so nobody waits behind an idle holder; but a
//     holder still owed GPU time keeps the turn through short pauses (a
//     training's step boundaries), since the waiter would queue far more
//     work in that pause than the pause is long. A holder that has run past
//     a waiter's virtual time loses the turn before its quantum ends.
//   - A hard cap is a token bucket in GPU time: a capped vGPU may hold the
//     turn only while it has tokens, even when it is alone. This holds for a
//     latency-critical vGPU too: with a cap it takes turns, wins each by its
//     level, and so waits only for its tokens (uncapped, it never waits).
//   - Backfill turns (PacingConfig::backfill) keep the turn's order and
//     charging but let the other uncapped members launch too: the holder's
//     channel groups run a long slice and the others a short one
//     (kHolderSliceUs, kBackfillSliceUs; set by each process, see
//     interposer/timeslice_applier.h), so the GPU runs the holder whenever it
//     has work and the others in its gaps, and gives it back within a short
//     slice and a switch. Exclusive turns idle the GPU while the holder's
//     host side prepares work, which stock time-slicing fills; a launch-bound
//     pair lost a third of its throughput to that on an H100
//     (docs/benchmarks.md). Backfilled GPU time is not charged: it is time
//     the holder did not want. A turn then ends without waiting for the
//     holder to drain. Capped members never backfill (their time outside
//     their turns would escape the cap).
//   - Latency-critical vGPUs never wait: LC over BE is the hardware
//     timeslices' job. But while an LC vGPU is active, best-effort vGPUs
//     launch nothing new, so the gaps between the LC's kernels are not
//     filled with BE work that the LC's next kernel would then wait for a
//     slice and two context switches behind. Active means either
//       - a request span or hint the application declared (HoldBestEffort;
//         at most kMaxHoldNs, so a forgotten span cannot starve BE), or
//       - automatically, with no application change: the LC launched within
//         its linger (NoteLcLaunch; the linger is the LC's own measure of the
//         gaps inside its bursts of launches), for at most kMaxAutoHoldNs of
//         one unbroken burst, so an LC that never pauses cannot starve BE.
//   - Every best-effort process reads the board for live LC members and
//     shortens its own channel groups' slices while one is live
//     (HigherLatencyCriticalLive), so LC protection does not depend on the
//     node schedule having seen the LC.
//   - Priority levels (core::LevelWord: a class, lc or be, and a rank) order
//     all of this: an LC member holds, and shortens the slices of, members
//     of every lower level, LC ones included, and never those of its own;
//     turns go to the highest best-effort level that demands, fairly within
//     it, and a lower level that has had no turn for level_starvation_ns gets
//     the next one, so none starves.
//
// Crash safety: there is no lock. The turn is one word changed by CAS; the
// CAS winner alone charges the outgoing holder and publishes the new turn's
// times. A holder whose heartbeat has gone stale is charged nothing: its
// row may be claimed by a newcomer before the charge lands
// (verification/handover.pml). Every wait is bounded by time: a holder that
// never drains (killed with work queued) is passed over after the drain
// timeout; a member whose processes all died stops heartbeating and is
// ignored; a hand-over whose winner died before publishing is redone after
// a timeout.
//
// Every process of every vGPU on the GPU can write every row. What a row
// claims that would let it hold or outrank others (its level, weight and
// cap) is therefore believed only from a roster (PacingConfig::trust,
// core/board_roster.h), and a row the roster does not list is ignored. What
// that leaves open is in board_roster.h.
//
// Every function takes `now_ns` (CLOCK_MONOTONIC, shared by all processes of
// one boot) so that tests drive the board with a fake clock. All are
// lock-free, allocation-free and syscall-free: the interposer calls them from
// launch hooks.
#ifndef GPUSLICE_CORE_PACING_BOARD_H_
#define GPUSLICE_CORE_PACING_BOARD_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/board_roster.h"
#include "core/status.h"
#include "core/vgpu_layout.h"

namespace gpuslice::core {

inline constexpr uint64_t kBoardMagic = 0x4452414f42504721ull;  // "!GPBOARD"
inline constexpr uint32_t kBoardVersion = 4;                    // 2: LC activity; 3: priority levels; 4: closing turns
inline constexpr int kBoardMembers = 64;  // vGPUs per GPU

struct alignas(64) BoardMember {
  uint64_t vgpu_id;         // 0 = free; see VgpuIdOf
  uint64_t heartbeat_ns;    // refreshed by each process's compute thread
  uint32_t weight;          // compute share, 1..100
  uint32_t cap_pct;         // 0 = no cap
  uint32_t priority;        // its level: core::LevelWord
  uint32_t busy_processes;  // processes with work queued on this GPU
  uint64_t demand_ns;       // last time one of its launches waited at the gate
  uint64_t last_launch_ns;  // last launch by any of its processes
  uint64_t drained_ns;      // last time busy_processes fell to 0
  uint64_t vtime;           // charged GPU time scaled to a 100% share
  uint64_t charged_ns;      // GPU time charged in turns (the measured share)
  int64_t cap_tokens_ns;    // token bucket at cap_stamp_ns
  uint64_t cap_stamp_ns;
  uint64_t turns;           // turns held
  // LC only: best-effort vGPUs hold their launches until then (a request
  // span or a pre-preemption hint; gpuslice.h).
  uint64_t hold_until_ns;
  // LC only: when the current burst of launches began (last_launch_ns is its
  // latest launch), and how long after a launch the burst counts as going on.
  uint64_t lc_burst_start_ns;
  uint32_t lc_linger_us;  // 0 = no automatic hold
  // Capped only: 1 while work it queued in its last turn runs on after the
  // turn passed without its drain (the drain timeout); that time is charged
  // as its processes tick (ChargeRunOn), and the rest once it drains or its
  // next turn starts (pacing_board.cc, Overrun).
  uint32_t ran_on;
  // When its last turn ended (or it joined): how long a member of a lower
  // level has gone without a turn (PacingConfig::level_starvation_ns).
  uint64_t turn_ended_ns;
};
static_assert(sizeof(BoardMember) == 128);

struct Board {
  FileHeader header;
  // holder + 1, sequence, quantum and start (pacing_board.cc, struct Turn);
  // 0 in the holder bits = nobody holds it.
  uint64_t turn;
  uint64_t reserved[3];  // zero; keeps version 4's layout
  uint64_t vclock;  // virtual time of the last holder chosen
  uint8_t pad[16];
  BoardMember members[kBoardMembers];
};
static_assert(offsetof(Board, members) % 64 == 0);

struct PacingConfig {
  uint64_t quantum_ns = 10'000'000;       // a turn, while others wait
  // A capped vGPU starts a turn only with this much GPU time in tokens: a
  // turn as long as anyone's. Each turn begins behind the backfilling
  // neighbour's queued work (a slice and a switch, ~0.3 ms), which its cap
  // is charged; 1 ms turns lost a quarter of a GPU-bound training's 30% cap
  // beside a busy neighbour (23.8-24.3% against 26.7-26.9%; alone 29.4 and
  // 30.0%; docs/benchmarks.md, run 45).
  uint64_t min_quantum_ns = 10'000'000;
  // A drained holder that launches nothing for this long gives the turn away
  // to a waiter owed more GPU time than it; after long_idle_ns, to anyone.
  // (A pause between a training's steps must not hand a 10% vGPU a chance
  // to queue a whole step of its own ahead of the 90% one.)
  uint64_t idle_handover_ns = 300'000;
  uint64_t long_idle_ns = 2'000'000;
  uint64_t demand_window_ns = 3'000'000;  // a waiter refreshes demand more often
  // A holder that has used this much GPU time beyond a waiting member's
  // fair share loses the turn before its quantum ends.
  uint64_t preempt_lead_ns = 10'000'000;
  // Idle this long, a vGPU comes back at the virtual clock (no banked credit).
  uint64_t idle_reset_ns = 100'000'000;
  uint64_t drain_timeout_ns = 200'000'000;
  uint64_t member_timeout_ns = 1'000'000'000;
  uint64_t cap_burst_ns = 20'000'000;     // most GPU time a capped vGPU banks
  // Turns go to the highest level that demands; a member of a lower level
  // that has had no turn for this long gets the next one (a quantum), so no
  // level starves: it gets at least quantum / (this + a quantum) of the GPU.
  uint64_t level_starvation_ns = 1'000'000'000;
  // Backfill turns (see the top of this file); false = exclusive turns.
  bool backfill = false;
  // Which rows to believe (core/board_roster.h): with a trust, a row counts
  // only if its vGPU id is in it, and its level, weight and cap are the
  // trust's, whatever the row says. nullptr: every row as it says (a board
  // whose vGPUs are all one user's, standalone without a roster).
  const BoardTrust* trust = nullptr;
};

// Slices under backfill turns. The holder's lasts a quantum: its turn need
// not outlast it, and it is switched out only when its slice ends while a
// backfiller has work. A backfiller's bounds how long the holder waits for
// the GPU when its work arrives (the slice plus a switch, ~175 us measured;
// docs/gpu-facts.md), as the slice beside an LC does.
inline constexpr uint64_t kHolderSliceUs = 10'000;
inline constexpr uint64_t kBackfillSliceUs = kDefaultSliceBesideLcUs;

// The credit a process banks against waits its share does not explain
// (core/gate_wait_budget.h). A turn's overshoot to its drain (the quantum
// and the drain timeout), the tokens a turn must start with and a burst
// banked before it make the most one honest turn leaves unexplained; a vGPU
// owing that takes no new turn until it is paid, so debts do not stack.
// Twice that: on a loaded machine the look that ends a turn comes late, and
// a waiter's turn may come after one of each other vGPU's. (On the board's
// simulation, 20 ms kernels queued 16 deep run a quarter of it out, and not
// half: PacingBoardTest.NoHonestJobWaitsLongerThanItsShareExplains.)
inline uint64_t GateWaitBufferNs(const PacingConfig& c) {
  return 2 * (c.quantum_ns + c.drain_timeout_ns + c.min_quantum_ns + c.cap_burst_ns);
}

struct MemberSpec {
  uint32_t weight = 100;
  uint32_t cap_pct = 0;
  Priority priority = Priority::kBestEffort;  // its level's class ...
  uint32_t rank = 0;                          // ... and rank (LevelWord)
};

// The board file of a GPU, in a vGPU directory's `boards/`: "gpu-" and the
// UUID's 32 hex digits.
std::string BoardFileName(const uint8_t uuid[16]);

// A stable id for a vGPU (nonzero) from its name and its limits file's inode.
uint64_t VgpuIdOf(const std::string& name, uint64_t limits_inode);

// Initialises a zeroed board in place (creator only).
void InitBoard(Board* board);
Status ValidateBoard(const Board& board, const std::string& path);
// Whether the file or memfd `fd` holds a whole board of this version (one
// of another version is refused by ValidateBoard, so its GPU runs unpaced).
// Reads its header: a syscall, for the node's side, never a launch path.
bool IsCurrentBoard(int fd);

// Finds the vGPU's entry or claims one; -1 when the board is full.
int JoinBoard(Board* board, uint64_t vgpu_id, const MemberSpec& spec, uint64_t now_ns);
// Keeps the entry alive and its share/cap current (live resize).
void Heartbeat(Board* board, int member, const MemberSpec& spec, uint64_t now_ns);

// Another live member (any class) is on the board.
bool OthersLive(const Board& board, int member, uint64_t now_ns, const PacingConfig& config = {});

// Whether a process of `member` must pace: whenever it has a cap. Else a
// best-effort member while another live vGPU is on the board (best-effort
// ones share turns; a latency-critical one may hold best-effort launches),
// and a latency-critical member only while an LC member of a higher level is
// live (whose holds it obeys; uncapped, it never waits for turns).
bool PacingNeeded(const Board& board, int member, uint64_t now_ns, const PacingConfig& config = {});

enum class GateDecision { kGo, kWait };
// For a launch of `member` that has waited `waited_ns` so far: go, or wait
// (then call again). Advances the turn as needed. A launch is held by the
// holds of LC members of higher levels (LaunchesHeld); one that has waited
// kMaxAutoHoldNs is no longer held by an automatic hold (a starvation guard:
// an LC that pauses just past its linger between bursts would otherwise hold
// lower levels for good; verification/lc_hold.pml). An uncapped LC member
// then goes; a best-effort or capped one takes its turn. Turns go to the
// highest level that demands, and within a level by virtual time (see Best
// in the .cc). Under backfill turns, an uncapped member that does not hold
// the turn goes, and is marked as demanding (so the holder's turn ends at
// its quantum); a capped one waits for its turn as under exclusive turns.
// With `obey_holds` false, holds are not looked at (the caller has: its
// hold budget, core/hold_budget.h, is spent, or it found no hold).
GateDecision TryEnter(Board* board, int member, uint64_t now_ns, const PacingConfig& config = {},
                      uint64_t waited_ns = 0, bool obey_holds = true);
// After TryEnter let a launch of `member` go, and its process then marked
// itself busy (NoteBusy; a process already marked need not mark again):
// whether the launch may still go. Where `member`'s turns are exclusive
// (a best-effort one's under exclusive turns, or any capped one's), only
// while the turn is still its own and not being handed over: the hand-over
// looks at the busy mark after closing the turn (pacing_board.cc,
// CloseTurn), so a launch that passes here reaches the GPU in its own
// vGPU's turn, however long its thread is then descheduled. Elsewhere
// always.
bool LaunchMayGo(Board* board, int member, const PacingConfig& config = {});
// A launch of `member` is waiting at the gate.
void NoteWaiting(Board* board, int member, uint64_t now_ns, const PacingConfig& config = {});
void NoteLaunch(Board* board, int member, uint64_t now_ns);
// One process of `member` now has work queued (busy) or has drained.
void NoteBusy(Board* board, int member, bool busy, uint64_t now_ns);

// A process of capped `member` still has work queued, on a tick after its
// turn passed at the drain timeout (BoardMember::ran_on): the time that
// work has run on since the turn ended, or since the last such call, is
// charged now. A live process so vouches for the run-on as it goes, however
// long its queue; what nobody vouches for (a killed process's busy mark) is
// charged for at most member_timeout_ns when the run-on ends.
void ChargeRunOn(Board* board, int member, uint64_t now_ns, const PacingConfig& config = {});

// Whether `member`'s own cap keeps it from a turn now: capped, not holding
// the turn, and its tokens, less a run-on not yet charged, short of a
// turn's worth (min_quantum_ns). A launch waiting then waits for its own
// cap, however long its debt takes to pay back, not for another member to
// pass the turn. (In its own turn it waits for its own drain: time its cap
// is charged for as used, so no wait for tokens. Counted as both, an
// honest job with 1 ms kernels queued 16 deep outran what its cap explains
// within 4 s: core/gate_wait_budget.h.)
bool WaitsForOwnCap(const Board& board, int member, uint64_t now_ns, const PacingConfig& config = {});

// Hands the turn over if it is due (the holder's quantum is over or it is
// idle, someone else demands, and the holder has drained). Called by
// waiters and by every process's periodic tick.
void AdvanceTurn(Board* board, uint64_t now_ns, const PacingConfig& config = {});

// An LC member's request span or hint: members of lower levels wait at the
// gate until `until_ns` (at most kMaxHoldNs from now) or ReleaseHold.
inline constexpr uint64_t kMaxHoldNs = 200'000'000;
void HoldBestEffort(Board* board, int member, uint64_t until_ns, uint64_t now_ns);
void ReleaseHold(Board* board, int member, uint64_t now_ns);

// An LC member launched work at `now_ns` (called at most every few tens of
// µs per process, see interposer/lc_activity.h); a gap longer than
// `linger_us` since its previous launch starts a new burst. Best-effort
// members are held while now < last launch + linger and the burst is
// younger than kMaxAutoHoldNs. linger_us is clamped to kMaxLingerUs; 0 turns
// the automatic hold off for this member.
inline constexpr uint32_t kMaxLingerUs = 2000;
inline constexpr uint64_t kMaxAutoHoldNs = 100'000'000;
void NoteLcLaunch(Board* board, int member, uint32_t linger_us, uint64_t now_ns);

// Launches of `member` must wait for a latency-critical member of a higher
// level: its span or hint, or (unless `auto_hold` is false) its automatic
// hold. Work of a level is never held by a level below it, nor by its own,
// nor by a capped LC member while it has no tokens (it cannot run then).
bool LaunchesHeld(const Board& board, int member, uint64_t now_ns, bool auto_hold = true,
                  const PacingConfig& config = {});

// A live latency-critical member of a higher level than `member` is on the
// board (`member`'s processes then use their slice beside LC). `member`'s
// own level is read through config.trust; the others' rows as written,
// roster or not (see the .cc: the safe direction).
bool HigherLatencyCriticalLive(const Board& board, int member, uint64_t now_ns, const PacingConfig& config = {});

// Another live best-effort member than `member` has work queued on this GPU
// (busy_processes). Rows are believed through config.trust. A forged busy
// mark only makes the reader take a longer slice (interposer/
// timeslice_applier.h), which costs the LC what any busy neighbour does.
bool OtherBestEffortBusy(const Board& board, int member, uint64_t now_ns, const PacingConfig& config = {});

// Who holds the turn now (-1 = nobody); for views and tests.
int TurnHolder(const Board& board);

// Another member holds the turn, live, with a cap (through config.trust):
// its turn is the GPU time its cap is charged, so under shares by slices
// the uncapped members backfill meanwhile, as every member does under turns.
bool CappedTurnHeldByOther(const Board& board, int member, uint64_t now_ns, const PacingConfig& config = {});

}  // namespace gpuslice::core

#endif  // GPUSLICE_CORE_PACING_BOARD_H_
