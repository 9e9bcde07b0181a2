/* gate.pml: an exclusive turn's hand-over against its holder's launches in
 * flight (src/interposer/pacer.cc: EnterGate, MarkLaunching, AfterLaunch,
 * PollDrain; src/core/pacing_board.cc: NoteBusy, LaunchMayGo, AdvanceTurn's
 * CloseTurn, SwitchTurn).
 *
 * Member A holds an exclusive turn (exclusive turns, or a cap). Two of its
 * threads launch; its compute thread polls for its drain; a process of
 * member B hands the turn over whenever it sees A drained, then gives it
 * back. A's GPU finishes A's kernels in its own time. Every shared access
 * is one atomic step, so spin interleaves the threads at every access: a
 * thread may be descheduled between any two (a CPU-starved or throttled
 * container).
 *
 * Property G1: A's kernel reaches the GPU only while A holds the turn, and
 * the turn passes to B only when A has no kernel left on the GPU. Then A's
 * and B's work never share the GPU, and each turn's length is its holder's
 * GPU time (the premise of exclusive turns' charge and of caps).
 *
 * The code's rules, each removed by a seeded mutation that spin must catch:
 *   MUT_MARK_AFTER  the launch marks its process busy after it returns, as
 *                   before 2026-11-28 (its gate passed, then its thread
 *                   stalled while A drained and the turn passed)
 *   MUT_NO_CLOSE    the hand-over passes the turn on having seen A drained,
 *                   without closing it and looking again (a launch marks
 *                   and looks between the two)
 *   MUT_NO_LAUNCHING  the drain poll ignores launches between their mark
 *                   and their marker (it sees the marks' busy bit, but not
 *                   the kernel queued before its marker is recorded)
 */

#define LAUNCHES 2   /* per launching thread */
#define ATTEMPTS 4   /* hand-overs tried, passed or reopened */

/* the board: the turn word and A's row */
bool b_holds = false;    /* the turn's holder is B (else A) */
bool closing = false;
byte busy = 0;           /* busy_processes of A's row */
/* A's process (pacer.cc's Device) */
bool work_bit = false;   /* `work`'s busy bit ... */
byte work_seq = 0;       /* ... and its launch sequence (bounded: never wraps here) */
byte launching = 0;
/* A's GPU and its markers */
byte launched = 0;       /* kernels queued on the GPU */
byte done = 0;           /* ... of which finished */
byte recorded = 0;       /* kernels covered by a recorded marker */

/* MarkLaunching: count the launch, then make sure the board counts A busy
 * before `work` says so. */
inline mark() {
  launching++;
  do
  :: atomic { work_bit -> work_seq++ }; break
  :: atomic { !work_bit -> skip };
     busy++;
     if
     :: atomic { !work_bit -> work_bit = true; work_seq++ }; break
     :: atomic { work_bit -> skip }; busy--   /* another launch marked first */
     fi
  od
}

proctype Launcher() {
  byte n = 0;
  do
  :: n == LAUNCHES -> break
  :: else ->
gate:
    /* TryEnter: A holds the turn (open). */
    atomic { !b_holds && !closing -> skip };
#ifndef MUT_MARK_AFTER
    mark();
    /* LaunchMayGo */
    if
    :: atomic { !b_holds && !closing -> skip }
    :: atomic { b_holds || closing -> skip }; launching--; goto gate
    fi;
#endif
    /* the launch reaches the GPU */
    atomic { assert(!b_holds); launched++ };
#ifndef MUT_MARK_AFTER
    recorded = launched;   /* markers::Record */
    launching--;           /* AfterLaunch */
#else
    recorded = launched;
    mark();                /* the old AfterLaunch's mark */
    launching--;
#endif
    n++
  od
}

/* A's kernels finish whenever the GPU gets to them. */
proctype Gpu() {
  do
  :: atomic { done < launched -> done++ }
  :: atomic { done == LAUNCHES * 2 -> break }
  od
}

/* PollDrain, as often as the compute thread or a waiting launch runs it. */
proctype Poller() {
  bool saw_bit;
  byte saw_seq;
  byte seen_recorded;
  do
  :: atomic { saw_bit = work_bit; saw_seq = work_seq };
     if
     :: saw_bit ->
#ifndef MUT_NO_LAUNCHING
        if
        :: launching == 0
        :: else -> goto again
        fi;
#endif
        seen_recorded = recorded;
        if
        :: done >= seen_recorded ->   /* markers::Poll: all complete */
           if
           :: atomic { work_bit == saw_bit && work_seq == saw_seq -> work_bit = false };
              busy--
           :: atomic { !(work_bit == saw_bit && work_seq == saw_seq) -> skip }
           fi
        :: else
        fi
     :: else
     fi;
again:
     skip
  :: atomic { done == LAUNCHES * 2 && !work_bit -> break }
  od
}

/* B's AdvanceTurn while A holds an exclusive turn whose quantum is over:
 * it passes only once A has drained. */
proctype HandOver() {
  byte n = 0;
  do
  :: n == ATTEMPTS -> break
  :: else ->
    n++;
    atomic { busy == 0 && !b_holds -> skip };   /* A seen drained */
#ifndef MUT_NO_CLOSE
    closing = true;                              /* CloseTurn's CAS */
    if
    :: atomic { busy == 0 -> skip }
    :: atomic { busy != 0 -> closing = false }; goto next   /* reopened */
    fi;
#endif
    atomic { assert(done == launched); b_holds = true; closing = false };   /* SwitchTurn */
    b_holds = false;   /* B's turn, then the turn comes back to A */
next:
    skip
  od
}

init {
  atomic {
    run Launcher(); run Launcher(); run Gpu(); run Poller(); run HandOver()
  }
}
