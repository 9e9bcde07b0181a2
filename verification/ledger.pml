/* ledger.pml: the vGPU ledger's claim / charge / uncharge / detach / reap
 * protocol (src/core/memory_ledger.cc: Attach, TryCharge, Uncharge, Detach,
 * ReapDeadProcesses), with a kill -9 possible before any step.
 *
 * Each load, store, fetch_add or CAS of the code is one atomic step here;
 * the sum over slots (UsedBytes) is a sequence of loads, as in the code.
 * Allocations are one unit against a limit of LIMIT units. Two
 * configurations, small enough to be checked exhaustively in seconds:
 *   default  two processes race to claim, charge, free and detach, over two
 *            slots (no deaths): the races between live processes;
 *   -DKILL   one process that may be killed at any step, its replacement (a
 *            restarted container), and two reapers (a process's and the
 *            daemon's) racing to reclaim the dead one's slot, over one slot.
 *
 * Properties (docs/verification.md):
 *   P1 never over the limit: what live processes hold (allocations that
 *      succeeded, not freed, the process not exiting) never exceeds LIMIT;
 *      checked where a charge succeeds, the only step at which it grows;
 *   P2 no slot double-counted: a live process's slot holds exactly its own
 *      charges (no reaper zeroes it, no other process shares it);
 *   P3 once every process has finished or died and the dead are reaped,
 *      the charged total equals what live processes hold;
 *   and no invalid end state (no deadlock).
 *
 * Seeded mutations, each of which must make spin report an error:
 *   MUT_CLAIM_STORE  Attach claims a free slot by check-then-store, not CAS
 *   MUT_NO_BACKOFF   TryCharge checks the total, then adds (check, then act)
 *   MUT_REAP_NO_CAS  a reaper takes a dead process's slot without a CAS (-DKILL)
 */

#define LIMIT 1
#ifdef KILL
#define NSLOTS 1
#else
#define NSLOTS 2
#endif
#define NID 3          /* process ids 1 and 2 */
#define FREE 0
#define REAPING 255

byte owner[NSLOTS];    /* ProcessSlot::owner: FREE, REAPING or a process id */
byte used[NSLOTS];     /* ProcessSlot::used_bytes[0] */
bool dead[NID];        /* the OS: the process is gone (ProcessProbe::IsGone) */
bool started[NID];
bool finished[NID];
bool exiting[NID];     /* in Detach: its memory goes with the process */
byte held[NID];        /* successful charges not freed */
byte reapers_done = 0;

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
       if :: ok -> owner[s] = REAPING :: else -> skip fi;
#else
       atomic { if :: owner[s] == FREE -> owner[s] = REAPING; ok = true :: else -> ok = false fi };
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
/* ReapDeadProcesses: two reapers race over the slots, once each. */
active [2] proctype Reaper() {
  byte s = 0, seen;
  do
  :: s < NSLOTS ->
     seen = owner[s];
     if
     :: seen != FREE && seen != REAPING && dead[seen] ->
#ifdef MUT_REAP_NO_CAS
        owner[s] = REAPING;
#else
        atomic { if :: owner[s] == seen -> owner[s] = REAPING :: else -> seen = FREE fi };
#endif
        if :: seen != FREE -> used[s] = 0; owner[s] = FREE :: else -> skip fi
     :: else -> skip
     fi;
     seen = 0;
     s++
  :: else -> break
  od;
  atomic { reapers_done++ }
}
#endif

init {
  byte p, t, q, total, k;
#ifdef KILL
  started[1] = true;
  run App(1);
  /* kill -9 process 1 at any step (or let it finish); its replacement
   * starts afresh and may claim the slot the reapers free */
  if
  :: atomic { !finished[1] -> dead[1] = true }; started[2] = true; run App(2)
  :: finished[1]
  fi;
  reapers_done == 2;
#else
  atomic { started[1] = true; started[2] = true; run App(1); run App(2) }
#endif
  /* P3 */
  p = 1;
  do :: p < NID -> (!started[p] || finished[p] || dead[p]); p++ :: else -> break od;
  atomic {
    k = 0;   /* a death after the reapers' pass: reap it now */
    do
    :: k < NSLOTS ->
       if :: owner[k] != FREE && owner[k] != REAPING && dead[owner[k]] -> used[k] = 0; owner[k] = FREE
          :: else -> skip fi;
       k++
    :: else -> break
    od;
    slot_sum(total, k);
    live_held(t, q);
    assert(total == t)
  }
}
