"""The holder kernel (src/interposer/holder.h) end to end, in CI: real
processes, the real CLI and library, the fake CUDA driver.

A holder is a 1-thread kernel that gpuslice launches in a latency-critical
(LC) process's own context so that the GPU switches to it early
(pre-preemption hints) and stays there between an eager request's kernels
(request residency). Both are off unless GPUSLICE_LC_HOLDER asks for them
(on an H100 they measured slower than not holding); these tests ask for
"hint,span" unless they say otherwise. The fake driver models its contract (holders.h): a
launch of "gpuslice_holder" runs until its release word changes or its bound
passes, and cuCtxSynchronize waits for running ones. `cuda_app holders`
reads the fake's counts: LAUNCHED RUNNING RELEASED EXPIRED LAST_BOUND_NS
SYNCS_WAITED.

Covered here:
  - hints: gpuslice_hint_begin (bound 5 ms) and gpuslice_hint(usec) (bound
    usec + 1 ms) start one holder; the next kernel launch (by every way an
    application finds cuLaunchKernel), or hint_end, releases it; one nobody
    releases ends by its bound; cuCtxSynchronize releases holders first, so it
    never waits for one;
  - residency: a request span starts a holder bounded by the linger
    (GPUSLICE_LC_LINGER_US, default 2 ms); launches inside the span do not
    start more while it still covers half a linger, and do once it no longer
    does; hint_end inside a span keeps it; span_end releases it;
  - without GPUSLICE_LC_HOLDER no holder starts, and the task API still
    answers 0; a malformed item is warned about;
  - a best-effort vGPU gets no holder (GPUSLICE_NOT_LATENCY_CRITICAL), nor a
    bad argument;
  - a malformed GPUSLICE_LC_LINGER_US is warned about and the default used.

Not covered: GPUSLICE_LC_HOLDER=always (needs two vGPUs on one GPU and the
compute thread's tick).

The holder is experimental and built only with
-DGPUSLICE_EXPERIMENTAL_HOLDER=ON. A library built without it says so, once,
when an LC process that asks for holders first hints or opens a span; these
tests are skipped then, all but the one that checks that warning.

Each scenario is one process, since the fake's counts are per process. The
only sleeps are where a holder's bound passing is itself what is tested;
where a test needs a holder to still be running a few commands later, its
bound is made long (GPUSLICE_LC_LINGER_US=200000)."""
import pytest

from conftest import CUDA_APP, CUDA_APP_LINKED, World, lines

LC = ["--priority", "lc"]
BE = ["--priority", "be"]
LONG_LINGER = {"GPUSLICE_LC_LINGER_US": "200000"}  # 200 ms: outlasts any CI hiccup between two commands
LOOKUPS = ["link", "dlsym", "procaddress", "ptds"]

HINT_BEGIN_BOUND_NS = 5_000_000
HINT_SLACK_NS = 1_000_000
DEFAULT_LINGER_NS = 2_000_000
NOT_BUILT = "built without GPUSLICE_EXPERIMENTAL_HOLDER"


def run(world, run_args, app_args, env=None, lookup="dlsym", holder="hint,span"):
    app = CUDA_APP_LINKED if lookup == "link" else CUDA_APP
    env = dict(env or {})
    if holder is not None:
        env["GPUSLICE_LC_HOLDER"] = holder
    result = world.app(run_args, ["init", *app_args], lookup=lookup, env=env, app=app)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "init ok" in result.stdout, result.stdout
    return result


@pytest.fixture(scope="module")
def holders_built(tmp_path_factory):
    """Whether the library under test has the holder: asks for one and
    reads whether the library says it was built without it."""
    probe = World(tmp_path_factory.mktemp("holder-probe"))
    r = run(probe, LC, ["hint_begin"], env={"GPUSLICE_LOG": "warn"}, holder="hint")
    return NOT_BUILT not in r.stderr


@pytest.fixture
def world(tmp_path, holders_built):
    if not holders_built:
        pytest.skip("libgpuslice-cuda was built without GPUSLICE_EXPERIMENTAL_HOLDER")
    return World(tmp_path)


@pytest.fixture
def world_without_holders(tmp_path, holders_built):
    if holders_built:
        pytest.skip("libgpuslice-cuda was built with GPUSLICE_EXPERIMENTAL_HOLDER")
    return World(tmp_path)


def status(result, command):
    """The statuses the task-API COMMAND printed, in order."""
    found = lines(result, command)
    assert found, f"no '{command}' line in output:\n{result.stdout}\n{result.stderr}"
    return [int(words[1]) for words in found]


def holders(result):
    """Each `holders` line as a dict, in order."""
    keys = ("launched", "running", "released", "expired", "bound_ns", "syncs_waited")
    found = lines(result, "holders")
    assert found and all(len(words) == 7 for words in found), f"holders output:\n{result.stdout}\n{result.stderr}"
    return [dict(zip(keys, (int(x) for x in words[1:]))) for words in found]


@pytest.mark.parametrize("lookup", LOOKUPS)
def test_hint_begin_starts_one_holder_that_the_next_kernel_releases(world, lookup):
    r = run(world, LC, ["hint_begin", "holders", "kernel", "holders"], lookup=lookup)
    assert status(r, "hint_begin") == [0]
    assert "kernel ok" in r.stdout, r.stdout
    before, after = holders(r)
    assert before["launched"] == 1 and before["running"] == 1, before
    assert before["bound_ns"] == HINT_BEGIN_BOUND_NS, before
    assert after["launched"] == 1, f"the kernel launched another holder: {after}"
    assert after["running"] == 0 and after["released"] == 1, f"the kernel did not release the holder: {after}"


def test_hint_usec_bounds_its_holder_and_hint_end_releases_it(world):
    r = run(world, LC, ["hint", "400", "holders", "hint_end", "holders"])
    assert status(r, "hint") == [0]
    assert status(r, "hint_end") == [0]
    before, after = holders(r)
    assert before["launched"] == 1, before
    assert before["bound_ns"] == 400_000 + HINT_SLACK_NS, before
    assert after["launched"] == 1 and after["running"] == 0, after
    assert after["released"] == 1, f"hint_end did not release the holder: {after}"


def test_a_hint_is_bounded_at_the_longest_hold(world):
    # 10 s asks for more than the pacer's longest hold (200 ms): the holder
    # gets that plus the slack, never the 10 s.
    r = run(world, LC, ["hint", "10000000", "holders", "hint_end"])
    assert status(r, "hint") == [0]
    (h,) = holders(r)
    assert h["launched"] == 1 and h["bound_ns"] == 200_000_000 + HINT_SLACK_NS, h


def test_a_holder_nobody_releases_ends_by_its_bound(world):
    # hint 100 -> bound 1.1 ms; the 20 ms sleep is the bound passing.
    r = run(world, LC, ["hint", "100", "sleep", "20", "holders"])
    assert status(r, "hint") == [0]
    (h,) = holders(r)
    assert h["launched"] == 1 and h["bound_ns"] == 100_000 + HINT_SLACK_NS, h
    assert h["running"] == 0 and h["expired"] == 1 and h["released"] == 0, h


@pytest.mark.parametrize("lookup", LOOKUPS)
def test_ctx_synchronize_releases_holders_instead_of_waiting_for_them(world, lookup):
    r = run(world, LC, ["hint_begin", "ctxsync", "holders"], lookup=lookup)
    assert status(r, "hint_begin") == [0]
    assert "ctxsync ok" in r.stdout, r.stdout
    (h,) = holders(r)
    assert h["launched"] == 1, h
    assert h["syncs_waited"] == 0, f"cuCtxSynchronize waited for the holder: {h}"
    assert h["released"] == 1 and h["running"] == 0, h


def test_a_span_keeps_one_holder_over_its_kernels_and_span_end_releases_it(world):
    r = run(world, LC, ["span_begin", "holders", "kernel", "kernel", "kernel", "holders", "span_end", "holders"],
            env=LONG_LINGER)
    assert status(r, "span_begin") == [0]
    assert status(r, "span_end") == [0]
    assert r.stdout.count("kernel ok") == 3, r.stdout
    begun, inside, ended = holders(r)
    assert begun["launched"] == 1 and begun["running"] == 1, begun
    assert begun["bound_ns"] == 200_000_000, f"the linger is GPUSLICE_LC_LINGER_US: {begun}"
    assert inside["launched"] == 1, f"kernels launched holders while one still covered the linger: {inside}"
    assert inside["running"] == 1, inside
    assert ended["running"] == 0 and ended["released"] == 1, f"span_end did not release the holder: {ended}"


def test_a_span_renews_its_holder_once_it_no_longer_covers_half_a_linger(world):
    # Linger 10 ms; the 10 ms sleep is the holder's bound passing.
    r = run(world, LC, ["span_begin", "sleep", "10", "kernel", "holders", "span_end", "holders"],
            env={"GPUSLICE_LC_LINGER_US": "10000"})
    assert status(r, "span_begin") == [0]
    renewed, ended = holders(r)
    assert renewed["launched"] == 2, f"the kernel did not renew the span's holder: {renewed}"
    assert renewed["bound_ns"] == 10_000_000, renewed
    assert ended["launched"] == 2 and ended["running"] == 0, ended


def test_hint_end_inside_a_span_keeps_the_spans_holder(world):
    r = run(world, LC, ["span_begin", "hint_end", "holders", "span_end", "holders"], env=LONG_LINGER)
    assert status(r, "span_begin") == [0]
    assert status(r, "hint_end") == [0]
    inside, ended = holders(r)
    assert inside["launched"] == 1 and inside["running"] == 1 and inside["released"] == 0, inside
    assert ended["running"] == 0 and ended["released"] == 1, ended


def test_holders_are_off_by_default(world):
    r = run(world, LC, ["hint_begin", "hint", "400", "span_begin", "kernel", "holders", "span_end", "hint_end"],
            env=LONG_LINGER, holder=None)
    for call in ("hint_begin", "hint", "span_begin", "span_end", "hint_end"):
        assert status(r, call) == [0], call
    assert "kernel ok" in r.stdout, r.stdout
    (h,) = holders(r)
    assert h["launched"] == 0, h


def test_a_span_alone_starts_no_holder_when_only_hints_are_asked_for(world):
    r = run(world, LC, ["span_begin", "kernel", "holders", "span_end", "hint_begin", "holders"], env=LONG_LINGER,
            holder="hint")
    in_span, hinted = holders(r)
    assert in_span["launched"] == 0, in_span
    assert hinted["launched"] == 1, hinted


def test_a_bad_holder_item_is_warned_about_and_the_rest_used(world):
    r = run(world, LC, ["hint_begin", "holders"], env={"GPUSLICE_LOG": "warn"}, holder="hint,sometimes")
    warnings = [l for l in r.stderr.splitlines() if " warn: " in l and "GPUSLICE_LC_HOLDER=hint,sometimes" in l]
    assert len(warnings) == 1 and "'sometimes'" in warnings[0], f"wanted one warning naming the item:\n{r.stderr}"
    (h,) = holders(r)
    assert h["launched"] == 1, h


def test_a_best_effort_vgpu_gets_no_holder(world):
    r = run(world, BE, ["hint_begin", "hint", "400", "span_begin", "kernel", "span_end", "holders"],
            env=LONG_LINGER)
    assert status(r, "hint_begin") == [2]  # GPUSLICE_NOT_LATENCY_CRITICAL
    assert status(r, "hint") == [2]
    assert status(r, "span_begin") == [2]
    (h,) = holders(r)
    assert h["launched"] == 0, h


def test_a_zero_hint_is_refused_and_starts_no_holder(world):
    r = run(world, LC, ["hint", "0", "holders"])
    assert status(r, "hint") == [-2]  # GPUSLICE_BAD_ARGUMENT
    (h,) = holders(r)
    assert h["launched"] == 0, h


@pytest.mark.parametrize("linger", ["abc", "12x", "5", "300000"])
def test_a_bad_linger_is_warned_about_and_the_default_used(world, linger):
    r = run(world, LC, ["span_begin", "holders", "span_end"],
            env={"GPUSLICE_LC_LINGER_US": linger, "GPUSLICE_LOG": "warn"})
    assert status(r, "span_begin") == [0]
    warnings = [l for l in r.stderr.splitlines() if " warn: " in l and f"GPUSLICE_LC_LINGER_US={linger} " in l]
    assert len(warnings) == 1, f"wanted one warning naming GPUSLICE_LC_LINGER_US:\n{r.stderr}"
    (h,) = holders(r)
    assert h["launched"] == 1 and h["bound_ns"] == DEFAULT_LINGER_NS, h


def test_without_the_build_option_gpuslice_lc_holder_is_ignored_with_one_warning(world_without_holders):
    r = run(world_without_holders, LC, ["hint_begin", "span_begin", "kernel", "ctxsync", "span_end", "hint_end",
                                        "hint", "400", "holders"],
            env={"GPUSLICE_LOG": "warn"}, holder="hint,span")
    for call in ("hint_begin", "span_begin", "span_end", "hint_end", "hint"):
        assert status(r, call) == [0], call
    assert "kernel ok" in r.stdout and "ctxsync ok" in r.stdout, r.stdout
    warnings = [l for l in r.stderr.splitlines() if " warn: " in l and NOT_BUILT in l]
    assert len(warnings) == 1 and "GPUSLICE_LC_HOLDER=hint,span" in warnings[0], r.stderr
    (h,) = holders(r)
    assert h["launched"] == 0, h
