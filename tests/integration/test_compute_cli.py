"""`gpuslice run --compute/--compute-cap/--priority`: validation, and the
node schedule they feed (each vGPU's timeslice in its limits file)."""
import os
import struct

from conftest import CUDA_APP

# struct Limits (src/core/vgpu_layout.h): header 16 B, generation u64 at 16,
# name[64] at 24, device_count u32 at 88, devices at 96, 56 B each:
# uuid[16], memory_limit u64, share u32, cap u32, priority u32, flags u32,
# timeslice_us u64, timeslice_beside_lc_us u64.
_DEVICE = struct.Struct("<16sQIIIIQQ")


def read_limits(world, name):
    """The vGPU's generation and per-device (share, cap, priority, timeslice_us)."""
    with open(os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus", name, "limits"), "rb") as f:
        data = f.read(4096)
    generation = struct.unpack_from("<Q", data, 16)[0]
    count = struct.unpack_from("<I", data, 88)[0]
    devices = []
    for i in range(count):
        _, _, share, cap, prio, _, slice_us, _ = _DEVICE.unpack_from(data, 96 + i * _DEVICE.size)
        devices.append({"share": share, "cap": cap, "priority": prio, "timeslice_us": slice_us})
    return generation, devices


def one_line_error(result, *needles):
    assert result.returncode == 2, result
    err = result.stderr.strip().splitlines()
    assert len(err) == 1, result.stderr
    assert err[0].startswith("gpuslice: ")
    for n in needles:
        assert n in err[0], err[0]


def test_bad_compute_values(world):
    for bad in ["0", "101", "30%", "abc", "-5", "1e2"]:
        one_line_error(world.gpuslice("run", "--compute", bad, "--", "true"), "--compute", "from 1 to 100",
                       "--compute 30")
        one_line_error(world.gpuslice("run", "--compute-cap", bad, "--", "true"), "--compute-cap", "from 1 to 100")


def test_bad_priority(world):
    for bad in ["urgent", "LC", "1"]:  # default levels: critical, high, normal, low
        one_line_error(world.gpuslice("run", "--priority", bad, "--", "true"), "--priority", "lc", "be")


def hold(world, name, *flags):
    """Starts `gpuslice run --name NAME FLAGS -- cuda_app` that waits; returns (process, release)."""
    ready, done = world.path(name + ".ready"), world.path(name + ".done")
    p = world.start("run", "--name", name, *flags, "--", CUDA_APP, "ready", ready, "await", done)
    world.wait_for_file(ready)

    def release():
        open(done, "w").close()
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
    return p, release


def test_flags_reach_the_limits_and_the_schedule(world):
    _, release_a = hold(world, "a", "--compute", "30")
    gen, dev = read_limits(world, "a")
    assert dev[0]["share"] == 30 and dev[0]["priority"] == 0 and dev[0]["cap"] == 0
    assert dev[0]["timeslice_us"] == 10000  # alone: the whole BE period

    _, release_b = hold(world, "b", "--compute", "70")
    gen2, dev = read_limits(world, "a")
    assert dev[0]["timeslice_us"] == 3000 and gen2 > gen
    assert read_limits(world, "b")[1][0]["timeslice_us"] == 7000

    _, release_lc = hold(world, "lc", "--priority", "lc", "--compute-cap", "50")
    _, lc = read_limits(world, "lc")
    assert lc[0]["priority"] == 1 and lc[0]["cap"] == 50 and lc[0]["timeslice_us"] == 5000000
    assert read_limits(world, "a")[1][0]["timeslice_us"] == 600  # two BE beside an LC split 2 ms

    release_lc()
    assert read_limits(world, "a")[1][0]["timeslice_us"] == 3000
    release_b()
    assert read_limits(world, "a")[1][0]["timeslice_us"] == 10000
    release_a()


def test_compute_cap_100_means_no_cap(world):
    _, release = hold(world, "c", "--compute-cap", "100")
    assert read_limits(world, "c")[1][0]["cap"] == 0
    release()


def test_joining_with_conflicting_compute(world):
    _, release = hold(world, "j", "--compute", "30")
    r = world.gpuslice("run", "--name", "j", "--compute", "40", "--", "true")
    one_line_error(r, "already exists with --compute 30", "join it without --compute")
    r = world.gpuslice("run", "--name", "j", "--priority", "lc", "--", "true")
    one_line_error(r, "already exists", "--priority be")
    # Joining with the same settings, or none, is fine.
    assert world.gpuslice("run", "--name", "j", "--compute", "30", "--", "true").returncode == 0
    assert world.gpuslice("run", "--name", "j", "--", "true").returncode == 0
    release()
