/* ledger.pml: the vGPU ledger's claim / charge / uncharge / detach / reap
 * protocol (src/core/memory_ledger.cc: Attach, TryCharge, Uncharge, Detach,
 * ReapDeadProcesses, RedoIfStale), with a kill -9 possible before any step.
 *
 * Each load, store, fetch_add or CAS of the code is one atomic step here;
 * the sum over slots (UsedBytes) is a sequence of loads, as in the code.
 * Allocations are one unit against a limit of LIMIT units. Two
 * configurations, small enough to be checked exhaustively in seconds:
 *   default  two processes race to claim, charge, free and detach, over two
 *            slots (no deaths): the races between live processes;
 *   -DKILL   one process that may be killed at any step, its replacement (a
 *            restarted container), and two reapers (a process's and the
 *            daemon's) racing to reclaim the dead one's slot, over one slot;
 *            one reaper may itself be killed at any step, and a later reap
 *            pass (anyone's) follows once everything has settled.
 *
 * A claimer or reaper first marks the slot busy in its own name (BUSY(id),
 * the code's BusyWord: pid and pid namespace); a reaper that sees a busy
 * slot whose maker is gone takes it over with a CAS and finishes the job.
 *
 * Properties (docs/verification.md):
 *   P1 never over the limit: what live processes hold (allocations that
 *      succeeded, not freed, the process not exiting) never exceeds LIMIT;
 *      checked where a charge succeeds, the only step at which it grows;
 *   P2 no slot double-counted: a live process's slot holds exactly its own
 *      charges (no reaper zeroes it, no other process shares it);
 *   P3 once every process has finished or died and the dead are reaped,
 *      the charged total equals what live processes hold;
 *   P4 no slot stuck: once everything has settled and a reap pass has run,
 *      every slot is free (a claim or reclaim cut short by a kill is redone);
 *   and no invalid end state (no deadlock).
 *
 * Seeded mutations, each of which must make spin report an error:
 *   MUT_CLAIM_STORE  Attach claims a free slot by check-then-store, not CAS
 *   MUT_NO_BACKOFF   TryCharge checks the total, then adds (check, then act)
 *   MUT_REAP_NO_CAS  a reaper takes a dead process's slot without a CAS (-DKILL)
 *   MUT_NO_REDO      a busy slot is never taken over (-DKILL): P4
 *   MUT_REDO_LIVE    a busy slot is taken over without asking whether its
 *                    maker is gone (-DKILL)
 */

#define LIMIT 1
#ifdef KILL
#define NSLOTS 1
#else
#define NSLOTS 2
#endif
#define NID 5          /* apps 1 and 2, reapers 3 and 4 */
#define FREE 0
#define BUSY(id) (100 + (id))   /* marked busy by process id */
#define IS_BUSY(w) ((w) >= 100)
#define MAKER(w) ((w) - 100)

byte owner[NSLOTS];    /* ProcessSlot::owner: FREE, REAPING or a process id */
byte used[NSLOTS];     /* ProcessSlot::used_bytes[0] */
bool dead[NID];        /* the OS: the process is gone (ProcessProbe::IsGone) */
bool started[NID];
bool finished[NID];
bool exiting[NID];     /* in Detach: its memory goes with the process */
byte held[NID];        /* successful charges not freed */
bool reaped[NID];      /* a reaper finished its pass */

inline live_held(t, q) {
  t = 0; q = 1;
  do
  :: q < NID -> if :: started[q] && !dead[q] && !exiting[q] -> t = t + held[q] :: else -> skip fi; q++
  :: else -> break
  od
}

inline slot_sum(t, k) {
  t = 0; k = 0;
  do :: k < NSLOTS -> t = t + used[k]; k++ :: else -> break od
}

proctype App(byte me) {
  byte s = 0, mine, total, k, t, q;
  bool ok, charged = false;
  {
    /* Attach: claim a free slot (marked REAPING while it is filled in) */
    do
    :: s < NSLOTS ->
#ifdef MUT_CLAIM_STORE
       if :: owner[s] == FREE -> ok = true :: else -> ok = false fi;
       if :: ok -> owner[s] = BUSY(me) :: else -> skip fi;
#else
       atomic { if :: owner[s] == FREE -> owner[s] = BUSY(me); ok = true :: else -> ok = false fi };
#endif
       if
       :: ok -> used[s] = 0; owner[s] = me; mine = s; break
       :: else -> s++
       fi
    :: else -> goto out   /* full: device memory is refused */
    od;
    do
    :: !charged ->   /* TryCharge(1) */
       charged = true;
#ifdef MUT_NO_BACKOFF
       slot_sum(total, k);
       if :: total + 1 <= LIMIT -> used[mine] = used[mine] + 1; held[me] = 1 :: else -> skip fi;
#else
       used[mine] = used[mine] + 1;           /* fetch_add */
       slot_sum(total, k);                     /* UsedBytes */
       if
       :: total <= LIMIT -> held[me] = 1       /* the allocation succeeds */
       :: else -> used[mine] = used[mine] - 1  /* fetch_sub: refused */
       fi;
#endif
       atomic { live_held(t, q); assert(t <= LIMIT); t = 0; q = 0; total = 0; k = 0 };  /* P1 */
       assert(used[mine] == held[me])          /* P2 */
    :: held[me] > 0 ->   /* Uncharge(1) after the free */
       atomic { used[mine] = used[mine] - 1; held[me] = 0 };
       assert(used[mine] == held[me])          /* P2 */
    :: true ->   /* Detach at exit: zero the slot, then free it */
       exiting[me] = true;
       used[mine] = 0;
       atomic { held[me] = 0; owner[mine] = FREE };
       break
    od;
out:
    finished[me] = true
  } unless { dead[me] }
}

#ifdef KILL
/* Whether a reaper may take over busy word w (RedoIfStale). */
#ifdef MUT_NO_REDO
#define STALE(w) false
#elif defined(MUT_REDO_LIVE)
#define STALE(w) (IS_BUSY(w) && MAKER(w) != me)
#else
#define STALE(w) (IS_BUSY(w) && dead[MAKER(w)])
#endif

/* ReapDeadProcesses: two reapers race over the slots, once each. */
proctype Reaper(byte me) {
  byte s = 0, seen;
  {
    do
    :: s < NSLOTS ->
       seen = owner[s];
       if
       :: (seen != FREE && !IS_BUSY(seen) && dead[seen]) || STALE(seen) ->
#ifdef MUT_REAP_NO_CAS
          owner[s] = BUSY(me);
#else
          atomic { if :: owner[s] == seen -> owner[s] = BUSY(me) :: else -> seen = FREE fi };
#endif
          if :: seen != FREE -> used[s] = 0; owner[s] = FREE :: else -> skip fi
       :: else -> skip
       fi;
       seen = 0;
       s++
    :: else -> break
    od;
    reaped[me] = true
  } unless { dead[me] }
}

/* kill -9 reaper 3 at any step, or never */
proctype Killer() {
  if
  :: atomic { !reaped[3] -> dead[3] = true }
  :: true
  fi
}
#endif

init {
  byte p, t, q, total, k;
#ifdef KILL
  atomic { started[1] = true; run App(1); run Reaper(3); run Reaper(4); run Killer() };
  /* kill -9 process 1 at any step (or let it finish); its replacement
   * starts afresh and may claim the slot the reapers free */
  if
  :: atomic { !finished[1] -> dead[1] = true }; started[2] = true; run App(2)
  :: finished[1]
  fi;
  (reaped[3] || dead[3]) && reaped[4];
#else
  atomic { started[1] = true; started[2] = true; run App(1); run App(2) }
#endif
  /* P3, P4 */
  p = 1;
  do :: p < 3 -> (!started[p] || finished[p] || dead[p]); p++ :: else -> break od;
  atomic {
    k = 0;   /* a reap pass after everything settled (a death after the
              * reapers' pass, or a reclaim cut short by a kill) */
    do
    :: k < NSLOTS ->
       if :: owner[k] != FREE && !IS_BUSY(owner[k]) && dead[owner[k]] -> used[k] = 0; owner[k] = FREE
#ifndef MUT_NO_REDO
          :: IS_BUSY(owner[k]) && dead[MAKER(owner[k])] -> used[k] = 0; owner[k] = FREE
#endif
          :: else -> skip fi;
       k++
    :: else -> break
    od;
    slot_sum(total, k);
    live_held(t, q);
    assert(total == t);   /* P3 */
    k = 0;
    do
    :: k < NSLOTS -> assert(owner[k] == FREE); k++   /* P4 */
    :: else -> break
    od
  }
}
