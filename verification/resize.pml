/* Limits and generation changes during resize (issue 16).
 *
 * One writer: `gpuslice set` on a vGPU (VgpuManager::Resize,
 * src/node/vgpu_manager.cc) lowering or raising the memory limit, followed
 * by the node schedule pass that rewrites the slices (ApplyNodeSchedule,
 * src/node/node_schedule.cc). Two readers: tenant processes' interposers,
 * which charge memory against the limit (MemoryLedger::TryCharge,
 * src/core/memory_ledger.cc) and re-apply slices when the generation
 * changes (ApplyTimeslicesOnce, src/interposer/timeslice_applier.cc).
 *
 * What the code does (and the model): no seqlock. The writer stores each
 * field (release or relaxed), then bumps `generation` with a release
 * fetch-add, once per change. A reader loads `generation` (acquire),
 * remembers it, then loads the fields one by one. So a reader may read a
 * record mid-write (new timeslice_us, old timeslice_beside_lc_us); the
 * memory limit is one word, loaded (acquire) at every TryCharge, so it is
 * never torn. Spin runs sequentially consistent interleavings; the
 * release/acquire pairs above make the modelled orders the only ones that
 * matter (each reader-visible field store happens before the bump).
 * The 100 ms `verify` re-pass of ApplyTimeslicesOnce is left out: R2 is
 * shown without it.
 *
 * Bounds: 1 writer, 2 readers, 1 device, memory in units (old limit 2,
 * new limit 1 or 3), each reader STEPS nondeterministic actions (charge 1
 * unit, uncharge 1 unit, apply pass) while the writer runs, then, after
 * the writer is done, one charge and one apply pass.
 *
 * Properties:
 *  R1 (-DCHECK_R1) a reader applies a whole record, old or new: the code
 *     does NOT guarantee it (the configuration must fail; see
 *     docs/verification.md);
 *  R2 once the writer is done, a reader's next pass applies the latest
 *     record (no missed generation);
 *  R3 a charge that begins after the writer is done succeeds only if the
 *     total stays within the new limit; (-DR3_STRICT) the total at the end
 *     is within the new limit: NOT guaranteed, the check in Resize races
 *     with charges (must fail, a finding);
 *  and no invalid end state.
 */
#ifndef STEPS
#define STEPS 2
#endif
#define OLDLIM 2

byte lim = OLDLIM;   /* DeviceLimit::memory_limit_bytes */
byte ts = 0;         /* DeviceLimit::timeslice_us (old 0, new 1) */
byte bl = 0;         /* DeviceLimit::timeslice_beside_lc_us (old 0, new 1) */
byte gen = 1;        /* Limits::generation (vgpu_store.cc starts it at 1) */
byte used[2];        /* ProcessUsage::used_bytes, one per reader */
byte newlim = 0;     /* the limit the writer stores */
bool wdone = false;  /* Resize and the schedule pass have returned */

#define TOTAL (used[0] + used[1])  /* MemoryLedger::UsedBytes */

proctype Writer() {
  bool checked;
  /* `gpuslice set --memory`: lower or raise. */
  if
  :: newlim = 1
  :: newlim = 3
  fi;
  /* vgpu_manager.cc Resize: without --force, refuse if UsedBytes > new */
  atomic { checked = (TOTAL <= newlim) };
  if
  :: !checked -> goto schedule   /* kFailedPrecondition: nothing written */
  :: else
  fi;
#ifdef MUT_BUMP_FIRST
  gen++;                         /* mutation: bump before writing */
#endif
  /* vgpu_manager.cc write(): StoreRelease(d.memory_limit_bytes, ...) */
  lim = newlim;
#ifndef MUT_BUMP_FIRST
  /* vgpu_manager.cc bump(): FetchAddRelease(w->generation, 1) */
  gen++;
#endif
schedule:
  /* node_schedule.cc: slices rewritten, StoreRelaxed each */
#ifdef MUT_BUMP_FIRST
  gen++;
#endif
  ts = 1;
  bl = 1;
#if !defined(MUT_NO_BUMP) && !defined(MUT_BUMP_FIRST)
  /* node_schedule.cc: FetchAddRelease(limits->generation, 1) */
  gen++;
#endif
  wdone = true
}

proctype Reader(byte me) {
  byte last = 0;       /* g_last_generation (starts 0: first pass applies) */
  byte g, ats = 0, abl = 0, l, cached, k = 0;
  bool after, ok, final = false;
  byte t;
#ifdef MUT_CACHED_LIMIT
  cached = lim;        /* mutation: the limit read once, at attach */
#endif

  do
  :: k < STEPS -> k++;
     if
     :: goto charge
     :: used[me] > 0 -> used[me]--        /* MemoryLedger::Uncharge */
     :: goto apply
     fi
  :: k >= STEPS -> break
  od;
  wdone;               /* the writer has returned */
  goto last_charge;

charge:
  after = wdone;
  /* TryCharge: LimitBytes(device), an atomic load */
#ifdef MUT_CACHED_LIMIT
  l = cached;
#else
  l = lim;
#endif
  /* FetchAddSeqCst(my_used, 1); total = UsedBytes(); keep or back off */
  used[me]++;
  t = TOTAL;
  ok = (t <= l);
  if
  :: ok -> /* R3: the limit in force once the writer is done */
     assert(!after || t <= lim)
  :: else -> used[me]--                  /* FetchSubSeqCst: backed off */
  fi;
  l = 0; t = 0; ok = false;
  if
  :: after -> goto last_apply
  :: else -> goto next
  fi;

apply:
#ifdef MUT_CACHE_AFTER
  /* mutation: fields read first, generation cached afterwards */
  l = ts; t = bl; g = gen;
  if
  :: g == last -> skip
  :: else -> last = g; ats = l; abl = t
  fi;
  l = 0; t = 0;
#else
  /* timeslice_applier.cc: generation = LoadAcquire(limits.generation) */
  g = gen;
  if
  :: g == last -> skip               /* nothing changed: return */
  :: else ->
     last = g;                       /* g_last_generation = generation */
     ats = ts;                       /* WantedSlice: limit.timeslice_us */
     abl = bl                        /* ... timeslice_beside_lc_us */
  fi;
#endif
  g = 0;
#ifdef CHECK_R1
  assert(ats == abl);                /* R1: a whole record */
#endif
  if
  :: final -> goto done
  :: else -> goto next
  fi;

next:
  if
  :: k < STEPS -> k++;
     if
     :: goto charge
     :: used[me] > 0 -> used[me]--; goto next
     :: goto apply
     fi
  :: else -> wdone; goto last_charge
  fi;

last_charge:
  k = STEPS;
  after = true;
  final = true;
  goto charge;

last_apply:
  goto apply;

done:
  /* R2: the latest record, whole */
  assert(ats == 1 && abl == 1)
}

init {
  atomic {
    run Writer();
    run Reader(0);
    run Reader(1)
  }
#ifdef R3_STRICT
  /* every process settled: what they hold is within the limit in force */
  (_nr_pr == 1);
  assert(TOTAL <= lim)
#endif
}
