"""Bad input gets one line naming the problem and its fix, and a non-zero exit."""
import os

from conftest import CUDA_APP


def one_line_error(result, *needles):
    assert result.returncode != 0
    err = result.stderr.strip().splitlines()
    assert len(err) == 1, result.stderr
    assert err[0].startswith("gpuslice: ")
    for n in needles:
        assert n in err[0], err[0]


def test_malformed_memory(world):
    for bad in ["4XB", "lots", "0", "-1G"]:
        one_line_error(world.gpuslice("run", "--memory", bad, "--", "true"), "--memory", "for example 4GiB")


def test_unknown_gpu(world):
    one_line_error(world.gpuslice("run", "--gpu", "7", "--", "true"), "no GPU '7'", "it has 0")
    one_line_error(world.gpuslice("run", "--gpu", "GPU-nope", "--", "true"), "no GPU 'GPU-nope'")


def test_gpu_before_the_command_leaves_the_commands_own_flags_alone(world):
    # --gpu was a list option: it made `env -u X` fail with "-u not expected".
    r = world.gpuslice("run", "--gpu", "0", "--", "env", "-u", "NOTHING", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "GPU-face0000-0000-0000-0000-000000000000"
    one_line_error(world.gpuslice("run", "--gpu", ",", "--", "true"), "no GPU ''")


def test_missing_driver(world):
    r = world.gpuslice("run", "--", "true", env={"GPUSLICE_REAL_DRIVER": "/nonexistent/libcuda.so.1"})
    one_line_error(r, "no NVIDIA driver found", "GPUSLICE_REAL_DRIVER")
    r = world.gpuslice("run", "--", "true", env={"GPUSLICE_REAL_NVML": "/nonexistent/libnvidia-ml.so.1"})
    one_line_error(r, "no NVIDIA driver found")


def test_corrupted_state_directory(world):
    assert world.gpuslice("run", "--name", "c", "--", "true").returncode == 0
    vgpu = os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus", "c")
    os.makedirs(vgpu)
    for name in ("limits", "ledger", "members"):
        with open(os.path.join(vgpu, name), "wb") as f:
            f.write(b"\xff" * 100)
    one_line_error(world.gpuslice("run", "--name", "c", "--", "true"), "corrupted", "delete " + vgpu)


def test_bad_name_and_missing_command(world):
    one_line_error(world.gpuslice("run", "--name", "../etc", "--", "true"), "--name")
    one_line_error(world.gpuslice("run", "--memory", "1GiB"), "command")


def test_unrunnable_command(world):
    r = world.gpuslice("run", "--", "/nonexistent/program")
    assert r.returncode == 127
    assert "cannot run '/nonexistent/program'" in r.stderr


def test_exit_status_and_signals_pass_through(world):
    assert world.gpuslice("run", "--", "sh", "-c", "exit 7").returncode == 7
    assert world.gpuslice("run", "--", "sh", "-c", "kill -TERM $$").returncode == 128 + 15


def test_joining_with_conflicting_limits(world):
    ready, done = world.path("ready"), world.path("done")
    holder = world.start("run", "--name", "j", "--memory", "64MiB", "--", CUDA_APP, "ready", ready, "await", done)
    world.wait_for_file(ready)
    r = world.gpuslice("run", "--name", "j", "--memory", "128MiB", "--", "true")
    open(done, "w").close()
    holder.communicate(timeout=30)
    one_line_error(r, "already exists", "join it without --memory")


def test_the_library_fails_open_loudly_on_unreadable_limits(world, tmp_path):
    """An application is never broken by gpuslice's own failure."""
    from conftest import FAKE_DIR
    env = dict(world.env)
    env.update({"GPUSLICE_VGPU_DIR": str(tmp_path / "missing"), "LD_PRELOAD": os.path.join(
        os.path.dirname(CUDA_APP), "..", "lib", "libgpuslice-cuda.so"), "LD_LIBRARY_PATH": FAKE_DIR})
    import subprocess
    r = subprocess.run([CUDA_APP, "init", "alloc", "512M"], env=env, capture_output=True, text=True)
    assert r.returncode == 0
    assert "alloc ok" in r.stdout
    assert "NO MEMORY LIMIT IS ENFORCED" in r.stderr


def test_unwritable_state_directory(world):
    r = world.gpuslice("run", "--", "true", env={"GPUSLICE_STATE_DIR": "/proc/gpuslice-state"})
    one_line_error(r, "cannot create state directory /proc/gpuslice-state", "set GPUSLICE_STATE_DIR")


def test_empty_values_are_refused_not_read_as_absent(world):
    """`--memory ""` made an unlimited vGPU; empty compute flags passed (issue 11)."""
    for flag in ("--memory", "--compute", "--compute-cap", "--priority"):
        r = world.gpuslice("run", flag, "", "--", "true")
        one_line_error(r, flag + " was given an empty value", "leave " + flag + " out")
    ready, done = world.path("ready"), world.path("done")
    holder = world.start("run", "--name", "e", "--memory", "64MiB", "--", CUDA_APP, "ready", ready, "await", done)
    world.wait_for_file(ready)
    try:
        for flag in ("--memory", "--compute", "--compute-cap", "--priority"):
            other = ["--compute", "50"] if flag == "--memory" else ["--memory", "32MiB"]
            r = world.gpuslice("set", "e", flag, "", *other)
            one_line_error(r, flag + " was given an empty value")
    finally:
        open(done, "w").close()
        holder.communicate(timeout=30)


def test_a_limit_below_one_mib_is_refused_like_zero(world):
    for bad in ("1", "1023KiB"):
        one_line_error(world.gpuslice("run", "--memory", bad, "--", "true"), "give at least 1 MiB")


def test_run_takes_every_priority_spelling_that_set_takes(world):
    r = world.gpuslice("run", "--priority", "latency_critical", "--", "true")
    assert r.returncode == 0, r.stderr
