"""The daemon's compute-cap audit (src/daemon/cap_audit.h): a capped vGPU
that NVML sees use more than its cap while alone on its GPU is held to it
from outside its process, whatever its own library does; an honest capped
vGPU and an uncapped one are never touched; and a daemon that dies while
its throttle has a process stopped leaves nothing stopped for good.

The fake NVML reports what the test writes in its samples file, one line
per process and GPU, so "alone" and "busy" are scripted here."""
import os
import re
import signal
import threading
import time

from conftest import poll, scrape, series


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def start_app(dworld, name, gpu, *flags):
    ready, go = dworld.path(f"{name}.ready"), dworld.path(f"{name}.go")
    p = dworld.start("run", "--name", name, "--gpu", str(gpu), *flags, "--",
                     *dworld.app_cmd(["init", "alloc", "1M", "ready", ready, "await", go]))
    return p, int(dworld.wait_for_file(ready)), go


def over_cap_count(daemon, vgpu):
    return series(scrape(daemon.metrics_port), "gpuslice_vgpu_violations_total").get(
        f'vgpu="{vgpu}",kind="over_cap"', 0)


def quick_daemon(dworld, env, extra=""):
    """A daemon whose cap audit judges 5 s of alone time, not the default 30."""
    cfg = dworld.path("cap-audit.yaml")
    with open(cfg, "w") as f:
        f.write(f"version: 1\naudit:\n  over_cap_window_s: 5\n{extra}")
    return dworld.daemon(["--config", cfg], env=env)


def seen_stopped(pid, what):
    # Stopped for most of each 100 ms period: seen within a few reads.
    poll(lambda: state(pid) == "T", timeout=30, what=what)


def test_a_capped_vgpu_over_its_cap_alone_is_throttled_and_honest_ones_are_left_alone(dworld):
    samples = dworld.path("utilisation")
    open(samples, "w").close()
    d = quick_daemon(dworld, {"FAKE_GPU_COUNT": "3", "FAKE_NVML_PROCESS_UTILIZATION_FILE": samples})
    escaper, escaper_pid, escaper_go = start_app(dworld, "escaper", 0, "--compute-cap", "30")
    honest, honest_pid, honest_go = start_app(dworld, "honest", 1, "--compute-cap", "30")
    free, free_pid, free_go = start_app(dworld, "free", 2)
    with open(samples, "w") as f:
        # Each alone on its GPU: the escaper's library holds nothing, the
        # honest one's holds its cap, the uncapped one uses the whole GPU.
        f.write(f"{escaper_pid} 95 0\n{honest_pid} 29 1\n{free_pid} 100 2\n")
    poll(lambda: over_cap_count(d, "escaper") == 1, timeout=60, what="the escaper found over its cap")
    text = d.text()
    # (How much it used depends on the daemon's pass length: the fake NVML
    # gives one sample per call, which covers at most a second.)
    assert re.search(r"vGPU 'escaper' used \d+\.\d% of GPU 0 while alone there, over its compute cap of 30\.0%", text), text
    assert "throttled from outside" in text, text
    seen_stopped(escaper_pid, "the escaper stopped by its throttle")
    # Measured over the same passes, the others were not acted on.
    assert over_cap_count(d, "honest") == 0 and over_cap_count(d, "free") == 0
    assert "audit: vGPU 'honest'" not in text and "audit: vGPU 'free'" not in text, text
    # A throttled process is slowed, never hung: each finishes when told.
    for p, go in ((escaper, escaper_go), (honest, honest_go), (free, free_go)):
        open(go, "w").close()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (out, err)


def test_a_process_left_stopped_by_a_daemon_that_died_is_continued_by_the_next(dworld):
    samples = dworld.path("utilisation")
    open(samples, "w").close()
    env = {"FAKE_NVML_PROCESS_UTILIZATION_FILE": samples}
    d = quick_daemon(dworld, env)
    app, pid, go = start_app(dworld, "escaper", 0, "--compute-cap", "10")
    with open(samples, "w") as f:
        f.write(f"{pid} 100\n")
    poll(lambda: over_cap_count(d, "escaper") == 1, timeout=60, what="the escaper throttled")
    # Killed while its throttle has the process stopped (98% of each period
    # at its floor; in the rest, stopped here as the daemon would have).
    seen_stopped(pid, "the escaper stopped")
    d.kill9()
    if state(pid) != "T":
        os.kill(pid, signal.SIGSTOP)
    assert os.path.exists(os.path.join(dworld.state, "cap-throttle"))
    # The next daemon audits no caps: only what the first one left behind
    # can continue the process.
    cfg = dworld.path("no-cap-audit.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\naudit:\n  over_cap: off\n")
    d2 = dworld.daemon(["--config", cfg], env=env)
    assert "continued 1 process(es) a previous daemon's compute-cap throttle left stopped" in d2.text(), d2.text()
    assert state(pid) != "T"
    assert not os.path.exists(os.path.join(dworld.state, "cap-throttle"))
    open(go, "w").close()
    out, err = app.communicate(timeout=60)
    assert app.returncode == 0, (out, err)


def test_a_throttled_process_that_another_keeps_continuing_is_killed(dworld):
    samples = dworld.path("utilisation")
    open(samples, "w").close()
    d = quick_daemon(dworld, {"FAKE_NVML_PROCESS_UTILIZATION_FILE": samples})
    app, pid, go = start_app(dworld, "escaper", 0, "--compute-cap", "30")
    with open(samples, "w") as f:
        f.write(f"{pid} 95\n")
    poll(lambda: over_cap_count(d, "escaper") == 1, timeout=60, what="the escaper throttled")
    # A process of the tenant's own, not on the GPU, undoes every stop.
    done = threading.Event()

    def sibling():
        while not done.is_set():
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                return
            time.sleep(0.001)
    t = threading.Thread(target=sibling, daemon=True)
    t.start()
    try:
        out, err = app.communicate(timeout=60)
    finally:
        done.set()
    assert app.returncode == 137, (app.returncode, out, err)  # its command was killed (128 + SIGKILL)
    # The audit kills, then says so: on a loaded machine the run can end, and
    # the test read the log, in between (CI did once).
    poll(lambda: "another process continues it (SIGCONT); killed (audit.over_cap)" in d.text(), timeout=30,
         what="the audit's line on the kill")


def test_a_throttle_never_continues_a_process_an_audit_denied(dworld):
    """A capped process that NVML sees over its cap, and over its memory
    limit too: the memory audit denies it (SIGSTOP for good), and the cap
    audit's throttle, which stops and continues in every period, must not
    continue it (src/daemon/process_holds.h). Before, the throttle's
    SIGCONT undid the deny within a period."""
    procs, samples = dworld.path("gpu-processes"), dworld.path("utilisation")
    os.makedirs(procs)
    open(samples, "w").close()
    env = {"FAKE_GPU_PROCESS_DIR": procs, "FAKE_NVML_PROCESS_UTILIZATION_FILE": samples}
    d = quick_daemon(dworld, env, "  action: deny\n  grace_ms: 200\n")
    app, pid, go = start_app(dworld, "escaper", 0, "--compute-cap", "30", "--memory", "512MiB")
    # What the driver would say of a process that allocated past its
    # library: 4 GiB on GPU 0; and 45% of the GPU, alone (a throttle's
    # first duty is then 0.30 / 0.45: it continues the process for two
    # thirds of each period).
    with open(os.path.join(procs, str(pid)), "w") as f:
        f.write("0 4294967296\n")
    with open(samples, "w") as f:
        f.write(f"{pid} 45\n")
    poll(lambda: "action: deny" in d.text(), timeout=60, what="the memory audit's deny")
    poll(lambda: "throttled from outside" in d.text(), timeout=60, what="the cap audit's throttle")
    seen = []
    for _ in range(40):
        seen.append(state(pid))
        time.sleep(0.025)  # samples across several throttle periods; not a synchronisation
    assert set(seen) == {"T"}, f"the denied process ran while throttled: {seen}"
    os.kill(pid, signal.SIGKILL)
    app.communicate(timeout=60)

