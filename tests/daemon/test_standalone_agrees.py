"""A `gpuslice set` made while no daemon answers writes exactly what the
daemon would have: the same library (src/node), and the daemon's policy
constants, which it stores in the state directory (issue 14)."""
import os
import stat

CONFIG = """version: 1
timeslices:
  best_effort:
    period_us: 30000
    min_slice_us: 3000
    slice_beside_lc_us: 70
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
    d = dworld.daemon(["--config", cfg])
    assert os.path.exists(os.path.join(dworld.state, "policy"))
    done = dworld.path("done")
    for name, share in (("a", "30"), ("b", "70")):
        ready = dworld.path("ready-" + name)
        dworld.start("run", "--name", name, "--compute", share, "--", *dworld.app_cmd(["ready", ready, "await", done]))
        dworld.wait_for_file(ready)
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
