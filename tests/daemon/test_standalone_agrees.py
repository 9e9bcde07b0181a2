"""A `gpuslice set` made while no daemon answers writes exactly what the
daemon would have: the same library (src/node), and the daemon's policy
constants, which it stores in the state directory (issue 14)."""
import os
import stat

from conftest import poll

CONFIG = """version: 1
timeslices:
  best_effort:
    period_us: 30000
    min_slice_us: 3000
    slice_beside_lc_us: 70
    idle_after_ms: 0
"""


def read_limits(dworld, names):
    out = {}
    for n in names:
        with open(os.path.join(dworld.vgpu_dir(n), "limits"), "rb") as f:
            out[n] = f.read()
    return out


def write_back(dworld, saved):
    """Puts limits files back as they were, in place (the apps map them)."""
    for n, data in saved.items():
        path = os.path.join(dworld.vgpu_dir(n), "limits")
        mode = os.stat(path).st_mode
        os.chmod(path, mode | stat.S_IWUSR)
        with open(path, "r+b") as f:
            f.write(data)
        os.chmod(path, stat.S_IMODE(mode))


def test_standalone_set_writes_the_same_limits_as_the_daemon(dworld):
    cfg = dworld.path("config.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    # Both vGPUs have a process on the GPU, as the driver lists them, and
    # idle_after_ms 0 never judges one idle: the daemon counts them as
    # contending beside an LC, as a standalone pass, which has no such list,
    # counts every vGPU.
    procs = dworld.path("gpu-processes")
    os.makedirs(procs)
    env = {"FAKE_GPU_PROCESS_DIR": procs}
    d = dworld.daemon(["--config", cfg], env=env)
    assert os.path.exists(os.path.join(dworld.state, "policy"))
    done = dworld.path("done")
    for name, share in (("a", "30"), ("b", "70")):
        ready = dworld.path("ready-" + name)
        dworld.start("run", "--name", name, "--compute", share, "--",
                     *dworld.app_cmd(["init", "alloc", "1M", "ready", ready, "await", done]), env=env)
        dworld.wait_for_file(ready)
    # 30% of the default 2000 us period beside an LC, once the daemon has seen both.
    poll(lambda: dworld.ls()["a"]["devices"][0]["timeslice_beside_lc_us"] == 600, 20, "both on the GPU")
    before = read_limits(dworld, ["a", "b"])

    r = dworld.gpuslice("set", "a", "--compute", "60")
    assert r.returncode == 0, r.stderr
    by_daemon = read_limits(dworld, ["a", "b"])
    assert by_daemon["b"] != before["b"]  # b's slice follows a's new share

    write_back(dworld, before)
    d.stop()
    r = dworld.gpuslice("set", "a", "--compute", "60")
    assert r.returncode == 0, r.stderr
    standalone = read_limits(dworld, ["a", "b"])
    open(done, "w").close()
    # Byte for byte: values, slices and generations (one bump each).
    assert standalone == by_daemon


LEVELS = """levels:
  - {name: gold, class: lc, slo_ms: 10}
  - {name: silver, class: lc}
  - {name: bronze, class: be}
"""


def test_standalone_run_creates_the_same_limits_as_the_daemon(dworld):
    """`gpuslice run` without a daemon creates through the daemon's manager
    (node::StandaloneNode): the same vGPUs byte for byte, named levels and
    the node schedule's slices included."""
    cfg = dworld.path("config.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG + LEVELS)
    runs = (("a", ["--compute", "30", "--memory", "64MiB", "--priority", "silver"]),
            ("b", ["--compute", "70", "--priority", "bronze"]))

    def create_both(wait_for_schedule):
        done = dworld.path(f"done-{len(dworld.procs)}")
        procs = []
        for name, flags in runs:
            ready = dworld.path(f"ready-{name}-{len(dworld.procs)}")
            procs.append(dworld.start("run", "--name", name, *flags, "--",
                                      *dworld.app_cmd(["ready", ready, "await", done])))
            dworld.wait_for_file(ready)
            wait_for_schedule(name)
        return done, procs

    def finish(done, procs):
        open(done, "w").close()
        for p in procs:
            p.communicate(timeout=30)
            assert p.returncode == 0

    # The daemon stores its policy and levels at start; standalone reads them.
    dworld.daemon(["--config", cfg]).stop()
    assert os.path.exists(os.path.join(dworld.state, "levels.yaml"))
    # Standalone: each create's schedule pass runs inside `run`, before the app.
    done, procs = create_both(lambda name: None)
    standalone = read_limits(dworld, ["a", "b"])
    finish(done, procs)
    assert not os.path.exists(dworld.vgpu_dir("a"))  # each run removed its own

    d = dworld.daemon(["--config", cfg])
    # The daemon's pass runs on its worker: each create's pass must have
    # written before the next create, or the two would coalesce into one
    # pass (one generation bump fewer). ls reads the slice it writes.
    done, procs = create_both(
        lambda name: poll(lambda: dworld.ls(name)[name]["devices"][0]["timeslice_us"] != 0, what="schedule pass"))
    d.stop()  # joins the worker: the last pass has bumped
    by_daemon = read_limits(dworld, ["a", "b"])
    listed = dworld.ls()
    finish(done, procs)
    assert standalone == by_daemon
    # The named levels reached the vGPUs' level words.
    assert listed["a"]["priority_level"] == "silver"
    assert listed["b"]["priority_level"] == "bronze"
