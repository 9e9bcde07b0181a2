/* turns.pml: GPU turns between best-effort vGPUs under backfill turns
 * (src/core/pacing_board.cc: TryEnter, Backfill, AdvanceTurn, Best,
 * Demanding, NoteWaiting, Charge; src/interposer/pacer.cc: RoleOn), on a
 * discrete clock, for ever. Each tick every member chooses, in any way:
 * launch (through the gate), stay blocked with work queued (a thread in a
 * synchronisation: it launches nothing), or idle with nothing queued; then
 * the turn is advanced, as every process's tick does; then time advances.
 *
 * Times are kept as ages that saturate (turn age at QUANTUM + DRAIN_TIMEOUT, a demand's at
 * WINDOW, idleness at IDLE_RESET), and virtual times as differences from
 * the least, capped at VMAX, so the state space is finite and spin checks
 * every behaviour of unbounded length. Bounds: N members of equal share, a
 * quantum of QUANTUM ticks. Member 0 is capped unless -DNOCAP: it earns a
 * token every other tick (a 50% cap), holds the turn only with a token, and
 * a tick of its turn with work queued costs one.
 *
 * Properties (docs/verification.md):
 *   B1 a capped member never launches outside its own turn (its time
 *      outside its turns would escape the cap);
 *   B2 an uncapped member never waits at the gate;
 *   B3 an uncapped member that wants the GPU (launches, or is blocked with
 *      work queued) waits at most WAITBOUND ticks in a row while another
 *      holds the turn with work queued, whatever the others do: a
 *      backfiller blocked behind the holder's work still gets its turn.
 *      (While the holder has nothing queued, a backfiller has the GPU: a
 *      turn held idle is neither charged nor a wait.);
 *   no invalid end state.
 * Checked breadth-first (the behaviours are unbounded; depth-first search
 * would stop at its depth limit): PAN_CFLAGS="-DBFS -DCOLLAPSE".
 * With -DDEATH, one member may also be killed at any tick (its queued work
 * stays queued for ever: busy_processes is never brought down), stop
 * heartbeating, count as alive until MEMBER_TIMEOUT ticks have passed
 * (Alive), and then have its row taken by a newcomer at any later tick
 * (JoinBoard: nothing queued, the virtual clock's time). B3 is then checked
 * for the living, with the same bound: a dead holder within its timeout is a
 * member blocked with work queued, and one past it loses the turn at once
 * (AdvanceTurn's `!Alive(h)`).
 * Seeded mutations, each of which must make spin report an error:
 *   MUT_CAPPED_BACKFILLS   a capped member backfills like any other (B1)
 *   MUT_BUSY_NOT_DEMAND    only launch stamps count as demand, not queued
 *                          work (B3: a blocked backfiller is never chosen)
 *   MUT_DEAD_KEEPS_TURN    (with DEATH) a killed holder is never passed
 *                          over, neither at its drain timeout nor once its
 *                          heartbeat has timed out (B3)
 */

#define N 3
#define QUANTUM 2
#define DRAIN_TIMEOUT 2
#define WINDOW 2
#define IDLE_RESET 2
#define VMAX 3
/* B3's bound: each other member may be owed up to VMAX, then runs its
 * quantum (and a capped holder waits up to the drain timeout for its
 * drain). spin finds it tight to within a tick: one less fails. With a
 * death, a tick more (two where the capped member is the one killed and
 * replaced): the dead member keeps demanding with its work queued until its
 * heartbeat times out, and the newcomer on its row starts at the virtual
 * clock, behind a waiter that was served more, so the waiter also waits
 * while it catches up. spin finds these tight too (10 and 15 fail). */
#ifdef DEATH
#ifdef NOCAP
#define DEATH_TICKS 1
#else
#define DEATH_TICKS 2
#endif
#else
#define DEATH_TICKS 0
#endif
#ifndef WAITBOUND
#ifdef NOCAP
#define WAITBOUND ((N - 1) * (VMAX + QUANTUM) + DEATH_TICKS)
#else
#define WAITBOUND ((N - 1) * (VMAX + QUANTUM + DRAIN_TIMEOUT) + DEATH_TICKS)
#endif
#endif
#define NONE 255

#ifdef DEATH
#define MEMBER_TIMEOUT 2
/* 0: alive; else ticks since it was killed, plus one, saturating */
byte dead_age[N];
bool died = false;   /* one death per behaviour: bounds the state space */
#define DEAD(i) (dead_age[i] != 0)
#define ALIVE(i) (dead_age[i] <= MEMBER_TIMEOUT)
#else
#define DEAD(i) false
#define ALIVE(i) true
#endif

byte holder = NONE;
byte turn_age = 0;
byte vtime[N];          /* minus the least; the virtual clock is the holder's at its choice */
byte vclock = 0;
bool busy[N];
byte demand_age[N];     /* WINDOW = no recent demand stamp */
byte idle_age[N];       /* ticks since it last launched or demanded */
byte wait_age[N];       /* ticks it has wanted the GPU without holding the turn */
bool wanting[N];
byte tokens = 0;
bool even = false;

#ifdef NOCAP
#define CAPPED(i) false
#else
#define CAPPED(i) (i == 0)
#endif

#ifdef MUT_BUSY_NOT_DEMAND
#define DEMANDING(i) (ALIVE(i) && demand_age[i] < WINDOW)
#else
#define DEMANDING(i) (ALIVE(i) && (demand_age[i] < WINDOW || busy[i]))
#endif
#define MAY_HOLD(i) (!CAPPED(i) || tokens > 0)

/* Best(): the demanding member (or `extra`) that may hold, with the least
 * virtual time; ties to the first after the holder. */
inline best(extra, pick) {
  pick = NONE;
  k = 1;
  do
  :: k > N -> break
  :: else ->
     j = ((holder == NONE -> N - 1 : holder) + k) % N;
     if
     :: (DEMANDING(j) || (j == extra && ALIVE(j))) && MAY_HOLD(j) && (pick == NONE || vtime[j] < vtime[pick]) -> pick = j
     :: else -> skip
     fi;
     k++
  od
}

inline take(pick) {
  holder = pick;
  turn_age = 0;
  if :: pick != NONE -> vclock = vtime[pick] :: else -> skip fi
}

/* AdvanceTurn: a turn that is over (its quantum, or a capped holder's
 * tokens) passes at once to the best demander when another demands; a
 * capped holder's only once it has drained. */
inline advance() {
  if
  :: holder == NONE -> best(NONE, pick); take(pick)
#if defined(DEATH) && defined(MUT_DEAD_KEEPS_TURN)
  :: holder != NONE && DEAD(holder) -> skip   /* the turn waits for a drain that never comes */
  :: holder != NONE && !DEAD(holder) ->
#elif defined(DEATH)
  :: holder != NONE && !ALIVE(holder) -> best(NONE, pick); take(pick)   /* a dead holder: passed at once */
  :: holder != NONE && ALIVE(holder) ->
#else
  :: else ->
#endif
     other = false;
     k = 0;
     do
     :: k >= N -> break
     :: else -> other = other || (k != holder && DEMANDING(k)); k++
     od;
     spent = CAPPED(holder) && tokens == 0;
     if
     :: (turn_age >= QUANTUM && other) || spent ->
        if
        :: CAPPED(holder) && busy[holder] && turn_age < QUANTUM + DRAIN_TIMEOUT ->
           skip   /* exclusive: wait for its drain, at most the drain timeout */
        :: else ->
           /* a holder still active competes for the next turn like a
            * demander; one idle for IDLE_RESET does not */
           if
           :: busy[holder] || idle_age[holder] < IDLE_RESET -> best(holder, pick)
           :: else -> best(NONE, pick)
           fi;
           take(pick)
        fi
     :: else -> skip
     fi
  fi
}

/* NoteWaiting: back from idle, a member takes the virtual clock. */
inline note_waiting(i) {
  if :: idle_age[i] >= IDLE_RESET && vtime[i] < vclock -> vtime[i] = vclock :: else -> skip fi;
  demand_age[i] = 0;
  idle_age[i] = 0
}

active proctype World() {
  byte i, j, k, pick, least;
  bool other, spent, go;
  do
  :: skip; i = 0;
     do
     :: i >= N -> break
     :: else ->
        if
        :: DEAD(i) -> skip   /* killed: its processes do nothing */
        :: !DEAD(i) -> d_step {   /* launch, through TryEnter */
             advance();
             if
             :: holder == i ->
                other = false;
                k = 0;
                do
                :: k >= N -> break
                :: else -> other = other || (k != i && DEMANDING(k)); k++
                od;
                if
                :: turn_age < QUANTUM && MAY_HOLD(i) -> go = true
                :: !MAY_HOLD(i) -> go = false                  /* its cap is spent */
                :: (turn_age >= QUANTUM && MAY_HOLD(i)) && other ->
                   go = !CAPPED(i)                             /* the turn is passing */
                :: (turn_age >= QUANTUM && MAY_HOLD(i)) && !other ->
                   take(i); go = true                          /* a new turn, same holder */
                fi
             :: holder == NONE ->
                best(i, pick);
                if :: pick == i -> take(i); go = true :: else -> go = !CAPPED(i) fi
#ifdef MUT_CAPPED_BACKFILLS
             :: else -> go = true
#else
             :: else -> go = !CAPPED(i)
#endif
             fi;
             note_waiting(i);
             wanting[i] = true;
             if :: go -> busy[i] = true :: else -> skip fi;
             pick = 0; j = 0; k = 0
           };
           assert(!go || !CAPPED(i) || holder == i);   /* B1 */
           assert(go || CAPPED(i))                      /* B2 */
        :: !DEAD(i) -> d_step { wanting[i] = busy[i] }   /* blocked: wants the GPU if work is queued */
        :: !DEAD(i) -> d_step { busy[i] = false; wanting[i] = false }   /* idle, drained */
#ifdef DEATH
        :: !died && !DEAD(i) -> d_step { dead_age[i] = 1; died = true; wanting[i] = false }   /* kill -9: its work stays queued */
        :: DEAD(i) && !ALIVE(i) -> d_step {   /* a newcomer takes the row (JoinBoard) */
             dead_age[i] = 0; busy[i] = false; wanting[i] = false; vtime[i] = vclock;
             demand_age[i] = WINDOW; idle_age[i] = IDLE_RESET; wait_age[i] = 0 }
#endif
        fi;
        i++
     od;
     skip;
     d_step {
       advance();
       /* B3, as a bounded wait */
       i = 0;
       do
       :: i >= N -> break
       :: else ->
          if
          :: holder == i || !wanting[i] || holder == NONE || !busy[holder] -> wait_age[i] = 0
          :: else -> wait_age[i] = wait_age[i] + 1   /* another's work has the GPU */
          fi;
          i++
       od;
       /* the holder is charged a tick while it has work queued; member 0
        * earns a token every other tick and spends one a tick of its turn */
       if
       :: holder != NONE && busy[holder] ->
          vtime[holder] = vtime[holder] + 1;
          if :: CAPPED(holder) && tokens > 0 -> tokens-- :: else -> skip fi
       :: else -> skip
       fi;
       even = !even;
       if :: even && tokens < 2 -> tokens++ :: else -> skip fi;
       /* the clock: ages grow and saturate; virtual times stay relative */
       if :: turn_age < QUANTUM + DRAIN_TIMEOUT -> turn_age++ :: else -> skip fi;
       least = 255;
       i = 0;
       do
       :: i >= N -> break
       :: else ->
          if :: demand_age[i] < WINDOW -> demand_age[i]++ :: else -> skip fi;
          if :: idle_age[i] < IDLE_RESET -> idle_age[i]++ :: else -> skip fi;
#ifdef DEATH
          if :: DEAD(i) && dead_age[i] <= MEMBER_TIMEOUT -> dead_age[i]++ :: else -> skip fi;
#endif
          if :: vtime[i] < least -> least = vtime[i] :: else -> skip fi;
          i++
       od;
       i = 0;
       do
       :: i >= N -> break
       :: else -> vtime[i] = vtime[i] - least; if :: vtime[i] > VMAX -> vtime[i] = VMAX :: else -> skip fi; i++
       od;
       if :: vclock >= least -> vclock = vclock - least :: else -> vclock = 0 fi;
       if :: vclock > VMAX -> vclock = VMAX :: else -> skip fi;
       i = 0; pick = 0; j = 0; k = 0; least = 0
     };
     k = 0;
     do
     :: k >= N -> break
     :: else -> assert(CAPPED(k) || wait_age[k] < WAITBOUND); k++   /* B3 */
     od;
     k = 0
  od
}
