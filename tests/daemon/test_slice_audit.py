"""The daemon's slice audit (src/daemon/slice_audit.h): a tenant that sets
its own channel group's slice with the raw system call, which the library's
hook never sees, and parks the library's thread that would set it back, is
found from outside its process. The daemon sets the vGPU's slice back
through the tenant's own descriptor, and kills the process that raises it
again. A tenant that plays by the rules is never touched.

The fake RM device shares each group's slice with the daemon through
FAKE_RM_SHARED_DIR, as the GPU does; the RM log names who set what."""
import os

from conftest import CUDA_APP, poll
from test_lc_protection_daemon import BESIDE_LC, COMPUTE_TSG, FAKE_RM, hold

RAISED = 4000000


def rm_calls(log, kind, pid):
    """(us, ns) of each `kind` (set/get) on a compute group made by `pid`."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        rows = [l.split() for l in f if l.strip()]
    return [(int(us), int(ns)) for k, p, o, us, st, ns in rows if k == kind and int(p) == pid and o == COMPUTE_TSG
            and st == "0"]


def audited_world(dworld):
    shared, procs = dworld.path("rm-shared"), dworld.path("gpu-processes")
    os.makedirs(shared)
    os.makedirs(procs)
    log = dworld.path("rm.log")
    env = {"FAKE_RM_LOG": log, "FAKE_RM_SHARED_DIR": shared, "FAKE_GPU_PROCESS_DIR": procs}
    daemon = dworld.daemon(env={"LD_PRELOAD": FAKE_RM, **env})
    return daemon, log, env


def start_attacker(dworld, env, *commands):
    ready, done = dworld.path("attacker.ready"), dworld.path("attacker.done")
    app = [CUDA_APP, "init", "alloc", "1M", *commands, "ready", ready, "await", done]
    p = dworld.start("run", "--name", "be", "--priority", "be", "--", *app, env={"LD_PRELOAD": FAKE_RM, **env})
    return p, ready, done


def test_a_tenant_that_raises_its_slice_again_and_again_is_set_back_then_killed(dworld):
    daemon, log, env = audited_world(dworld)
    _, release_lc = hold(dworld, log, "lc", "--priority", "lc", alloc="1M", env=env)
    # Its library runs on and sets the slice back at each read-back; the
    # tenant outpaces it.
    p, _, _ = start_attacker(dworld, env, "rawslice", str(RAISED), "120")
    out, err = p.communicate(timeout=90)
    assert p.returncode == 137, (p.returncode, out, err)  # its command was killed (128 + SIGKILL)
    text = daemon.text()
    assert f"ran a {RAISED} us timeslice" in text and "kill (audit.raised_slice)" in text, text
    # The daemon set the group back to the BE's slice beside the LC, through
    # the tenant's descriptor, between the tenant's raises.
    sets = rm_calls(log, "set", daemon.proc.pid)
    assert sets and all(us == BESIDE_LC for us, _ in sets), sets
    release_lc()


def test_a_tenant_that_raises_its_slice_once_is_only_set_back(dworld):
    daemon, log, env = audited_world(dworld)
    _, release_lc = hold(dworld, log, "lc", "--priority", "lc", alloc="1M", env=env)
    # Its library's thread stopped first: nothing inside the process sets it back.
    p, ready, done = start_attacker(dworld, env, "freezetick", "rawslice", str(RAISED), "0")
    pid = int(dworld.wait_for_file(ready))
    poll(lambda: rm_calls(log, "set", daemon.proc.pid), 30, "the daemon set the slice back")
    # It set it back after the raise, and nothing raised it since.
    raised_at = max(ns for us, ns in rm_calls(log, "set", pid) if us == RAISED)
    assert [us for us, ns in rm_calls(log, "set", daemon.proc.pid) if ns > raised_at] == [BESIDE_LC]
    assert p.poll() is None, "set back, not acted on"
    open(done, "w").close()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and "freezetick ok" in out, (p.returncode, out, err)
    assert "kill (audit.raised_slice)" not in daemon.text()
    release_lc()


def test_tenants_that_play_by_the_rules_are_never_touched(dworld):
    """Slices change under the audit: a BE alone (its long slice), then
    beside an arriving LC (the tiny one), then resized. Each process's
    library sets its own; the daemon reads them and never sets one."""
    daemon, log, env = audited_world(dworld)
    be_pid, release_be = hold(dworld, log, "be", "--priority", "be", alloc="1M", env=env)
    poll(lambda: len(rm_calls(log, "get", daemon.proc.pid)) >= 2, 30, "the audit read the lone BE's slice")
    lc_pid, release_lc = hold(dworld, log, "lc", "--priority", "lc", alloc="1M", env=env)
    poll(lambda: rm_calls(log, "set", be_pid)[-1:] and rm_calls(log, "set", be_pid)[-1][0] == BESIDE_LC, 30,
         "the BE took its slice beside the LC")
    assert dworld.gpuslice("set", "be", "--compute", "40").returncode == 0
    reads = len(rm_calls(log, "get", daemon.proc.pid))
    poll(lambda: len(rm_calls(log, "get", daemon.proc.pid)) >= reads + 4, 30, "two more audit passes")
    assert rm_calls(log, "get", daemon.proc.pid), "the daemon audited the groups"
    assert not rm_calls(log, "set", daemon.proc.pid), "and never set one"
    assert "slice audit" not in daemon.text()
    release_lc()
    release_be()
