/* handover.pml: the charge of a turn at its hand-over, when the outgoing
 * holder's row can change hands (src/core/pacing_board.cc: AdvanceTurn's
 * charge and its floor, SwitchTurn's CAS and charge, JoinBoard's claim).
 *
 * A hand-over computes the outgoing holder's charge, wins the turn by CAS,
 * and only then adds the charge to the holder's row. Meanwhile the row's
 * vGPU may have died and a newcomer may claim the row (JoinBoard: once its
 * heartbeat is a member timeout old), resetting its virtual time to the
 * clock's. A charge computed for the dead vGPU's turn that lands after that
 * reset is paid by the newcomer, which then starts owing a turn it never
 * had (tens of seconds, if nobody ran the board since the death).
 *
 * Row 0 holds the turn at time 0; its vGPU may die at any tick, and a
 * newcomer claims the row at any moment it may. Row 1 is alive; two of its
 * processes hand the turn over, each at any moment, racing each other and
 * the claim at every step. Time is a discrete clock of TMAX ticks; a live
 * row heartbeats every tick.
 *
 * Assumption (the code's, stated in AdvanceTurn): a process takes fewer
 * than FRESH ticks (half the member timeout: 500 ms) from reading the clock
 * to landing its charge. The clock does not tick past it.
 *
 * With -DSTALLS the assumption is dropped, and spin shows what remains: a
 * process stalled that long between its look at a live holder and its
 * charge can still charge a newcomer (at most that holder's turn so far).
 *
 * Property H1: a charge that lands on the newcomer's virtual time covers
 * only time from its claim on. (A charge that lands before the reset is
 * overwritten by it: harmless.)
 *
 * The code's rules, each removed by a seeded mutation that spin must catch:
 *   MUT_CHARGE_STALE       a holder whose heartbeat is FRESH ticks old is
 *                          charged too (it may be dead, its row claimable)
 *   MUT_FLOOR_AFTER_CLAIM  JoinBoard raises the row's floor after claiming
 *                          its heartbeat, not before (a hand-over may see
 *                          the claimed heartbeat and the old floor)
 *   MUT_FLOOR_UP_TO_NOW    a floor later than the hand-over's clock read is
 *                          ignored (a claim just after that read), not
 *                          taken as "nothing to charge"
 */

#define TMAX 8
#define TIMEOUT 4        /* member_timeout_ns */
#define FRESH 2          /* member_timeout_ns / 2 */
#define NONE 255

byte now = 0;
/* row 0 */
byte beat = 0;           /* heartbeat_ns */
bool dead = false;       /* its vGPU's processes are gone: no heartbeat */
byte floor0 = 0;         /* turn_ended_ns */
bool reset_done = false; /* the newcomer has reset its virtual time */
byte claimed_at = NONE;  /* when the newcomer's heartbeat CAS won */
/* the turn word */
byte holder = 0;
byte start = 0;
byte seq = 0;
/* the timing assumption: when each racing hand-over read the clock */
bool busy[2];
byte began[2];

#define RAISE(x, v) if :: (v) > (x) -> x = (v) :: else -> skip fi

active proctype Clock() {
  do
  :: atomic {
#ifdef STALLS
       now < TMAX ->                         /* a process may stall for any time */
#else
       now < TMAX && (!busy[0] || now + 1 - began[0] < FRESH) && (!busy[1] || now + 1 - began[1] < FRESH) ->
#endif
       now++;
       if :: !dead -> beat = now :: else -> skip fi
     }
  :: now >= TMAX -> break
  od
}

active proctype Death() {
end:  /* or never */
  atomic { claimed_at == NONE && !dead -> dead = true }   /* kill -9 of row 0's vGPU, at any tick */
}

/* JoinBoard on row 0, once its heartbeat is a member timeout old; `tc` is
 * its clock read, used for every store as in the code. */
active proctype Newcomer() {
  byte seen_beat, tc;
end:  /* or never */
  atomic { dead && beat + TIMEOUT <= now -> seen_beat = beat; tc = now }
#ifndef MUT_FLOOR_AFTER_CLAIM
  RAISE(floor0, tc);                           /* RaiseToAcqRel(turn_ended_ns, now) */
#endif
  atomic {                                     /* CompareExchange(heartbeat_ns, beat, now) */
    if
    :: beat == seen_beat -> beat = tc; claimed_at = tc; dead = false
    :: else -> goto lost
    fi
  }
  reset_done = true;                           /* vgpu_id, then vtime = vclock, ... */
  floor0 = tc;                                 /* StoreRelaxed(turn_ended_ns, now) */
lost:
  skip
}

/* AdvanceTurn from row 0's turn, by a process of row 1. */
proctype HandOver(byte id) {
  byte t, h, st, sq, fl, from, charge;
  bool fresh;
  atomic { t = now; busy[id] = true; began[id] = now }      /* now, once per call */
  atomic { h = holder; st = start; sq = seq }               /* LoadAcquire(turn) */
  if :: h != 0 -> goto done :: else -> skip fi
  fresh = t < beat + FRESH;                                 /* heartbeat, then the floor */
  fl = floor0;
  from = st;
#ifdef MUT_FLOOR_UP_TO_NOW
  if :: fl > st && fl <= t -> from = fl :: else -> skip fi
#else
  if :: fl > st -> from = fl :: else -> skip fi
#endif
  if :: t > from -> charge = t - from :: else -> charge = 0 fi   /* a busy holder: UsedSince */
#ifndef MUT_CHARGE_STALE
  if :: !fresh -> charge = 0 :: else -> skip fi
#endif
  atomic {                                                  /* SwitchTurn's CAS */
    if
    :: holder == h && start == st && seq == sq -> holder = 1; start = t; seq++
    :: else -> goto done
    fi
  }
  atomic {                                                  /* Charge(old holder's row) */
    assert(charge == 0 || !reset_done || from >= claimed_at)   /* H1 */
  }
  RAISE(floor0, t);                                         /* RaiseToAcqRel(turn_ended_ns) */
done:
  busy[id] = false
}

init {
  run HandOver(0);
  run HandOver(1)
}
