/* lc_hold.pml: the gate in front of best-effort launches while a
 * latency-critical vGPU is active (src/core/pacing_board.cc: TryEnter,
 * LaunchesHeld, NoteLcLaunch, HoldBestEffort/ReleaseHold), on a discrete
 * clock: each tick the LC may launch, begin or end a request span, or idle;
 * then the BE, if it wants to launch, asks the gate; then time advances.
 *
 * Bounds: TICKS ticks; a linger of LINGER ticks, a burst bound of BURST
 * ticks (kMaxAutoHoldNs), a span bound of MAXHOLD ticks (kMaxHoldNs). The
 * LC's behaviour is any sequence of choices. Two configurations:
 *   default  the LC launches or idles (an unmodified application: only the
 *            automatic hold);
 *   -DSPANS  the LC begins and ends request spans or idles, leaving a tick
 *            between one span's end and the next span's begin.
 * Together (-DSPANS -DLAUNCHES) an LC that launches between back-to-back
 * spans holds BE for as long as it serves: no bound holds, and spin shows
 * it (docs/verification.md). That is LC priority as designed; a starvation
 * guard for BE is an open question.
 *
 * Properties (docs/verification.md):
 *   L1 the LC is never gated: every LC launch passes the gate at once;
 *   L2 a waiting BE launches within WAITBOUND ticks, whatever the LC does
 *      (the automatic hold cannot starve BE). Without the starvation guard
 *      it could: an LC that pauses just past its linger between bursts of
 *      BURST ticks left the BE no tick to launch in (found by this model);
 *   no invalid end state.
 * Seeded mutations, each of which must make spin report an error:
 *   MUT_LC_GATED        the gate tests the hold before the member's class
 *   MUT_NO_BURST_BOUND  the automatic hold has neither the burst bound nor
 *                       the starvation guard
 *   MUT_SPAN_UNBOUNDED  a span holds BE until its end, with no bound (-DSPANS)
 */

#define TICKS 24
#define LINGER 2
#define BURST 5
#define MAXHOLD 6
#define WAITBOUND 8   /* > max(BURST + LINGER, MAXHOLD) + 1 */

byte now = 1;
byte last_launch = 0;   /* BoardMember::last_launch_ns of the LC */
byte burst_start = 0;   /* lc_burst_start_ns */
byte hold_until = 0;    /* hold_until_ns (span) */
bool in_span = false;
byte span_ended_at = 0;

/* LaunchesHeld: a span, or the automatic hold. */
inline held(h, waited) {
  h = false;
#ifdef MUT_SPAN_UNBOUNDED
  if :: in_span -> h = true :: else -> skip fi;
#else
  if :: hold_until > now -> h = true :: else -> skip fi;
#endif
  if
  :: last_launch != 0 && now < last_launch + LINGER ->
#ifdef MUT_NO_BURST_BOUND
     h = true
#else
     if :: now - burst_start < BURST && waited < BURST -> h = true :: else -> skip fi
#endif
  :: else -> skip
  fi
}

/* TryEnter(member, waited): Go or Wait. A BE launch that has waited BURST
 * ticks is no longer held by the automatic hold (the starvation guard). */
inline gate(is_lc, go, waited) {
  held(h, waited);
#ifdef MUT_LC_GATED
  go = !h;
#else
  if :: is_lc -> go = true :: else -> go = !h fi
#endif
}

active proctype World() {
  bool h, go;
  byte be_waiting = 0;
  do
  :: now < TICKS ->
     /* The LC's choice for this tick. */
     if
#if !defined(SPANS) || defined(LAUNCHES)
     :: gate(true, go, 0); assert(go);    /* L1 */
        /* NoteLcLaunch: a gap longer than the linger starts a burst */
        if :: last_launch == 0 || now > last_launch + LINGER -> burst_start = now :: else -> skip fi;
        last_launch = now
#endif
#ifdef SPANS
     :: !in_span && now > span_ended_at + 1 ->   /* gpuslice_span_begin: hold until its end, bounded */
        in_span = true; hold_until = now + MAXHOLD
     :: in_span -> in_span = false; hold_until = now; span_ended_at = now   /* span_end */
#endif
     :: skip   /* idle */
     fi;
     /* The BE always wants to launch (a busy training). */
     gate(false, go, be_waiting);
     if
     :: go -> be_waiting = 0
     :: else -> be_waiting++; assert(be_waiting <= WAITBOUND)   /* L2 */
     fi;
     now++
  :: else -> break
  od
}
