"""Shared state that one tenant could break for all (issue 11): a full ledger
and a corrupt header make a process's device memory refused, never a private
ledger with the whole limit; a corrupt vGPU is shown as corrupt and is not
removed while in use; a reclaim whose reaper was killed is redone."""
import json
import mmap
import os
import struct
import subprocess
import time

from conftest import CUDA_APP, FAKE_DIR, MiB, lines

# Offsets from src/core/vgpu_layout.h (struct Ledger / ProcessSlot).
LEDGER_HIGH_WATER, LEDGER_SLOTS, SLOT_SIZE = 16, 256, 576
SLOT_OWNER, SLOT_START, SLOT_NS, SLOT_USED = 0, 8, 16, 24
MAX_PROCESSES = 1024
LIBRARY = os.path.join(os.path.dirname(CUDA_APP), "..", "lib", "libgpuslice-cuda.so")


def vgpu_dir(world, name):
    return os.path.join(world.env["GPUSLICE_STATE_DIR"], "vgpus", name)


def my_identity():
    """(pid, start time, pid namespace) of this process, as a slot names it."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return os.getpid(), int(fields[19]), os.stat("/proc/self/ns/pid").st_ino


def alloc_results(result):
    return [l[1] for l in lines(result, "alloc")]


def take_slots(path, first, count):
    """Marks `count` slots from `first` as held by this (live) test process,
    as that many idle processes of the vGPU would."""
    pid, start, ns = my_identity()
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        for i in range(first, first + count):
            base = LEDGER_SLOTS + i * SLOT_SIZE
            assert struct.unpack_from("<Q", m, base + SLOT_OWNER)[0] == 0
            struct.pack_into("<QQQ", m, base, (pid << 32) | (100000 + i), start, ns)
        struct.pack_into("<I", m, LEDGER_HIGH_WATER, max(first + count, struct.unpack_from("<I", m, 16)[0]))


def free_slot(path, i):
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        struct.pack_into("<Q", m, LEDGER_SLOTS + i * SLOT_SIZE + SLOT_OWNER, 0)


def test_a_process_finding_every_ledger_slot_taken_is_refused_device_memory_until_one_frees(world):
    ready, done = world.path("ready"), world.path("done")
    holder = world.start("run", "--name", "full", "--memory", "64MiB", "--", CUDA_APP, "init", "alloc", "8M",
                         "ready", ready, "await", done)
    world.wait_for_file(ready)
    ledger = os.path.join(vgpu_dir(world, "full"), "ledger")
    take_slots(ledger, 1, MAX_PROCESSES - 1)  # the holder has slot 0
    late_ready, freed = world.path("late-ready"), world.path("freed")
    late = world.start("run", "--name", "full", "--", CUDA_APP, "init", "alloc", "1M", "alloc", "1M", "ready",
                       late_ready, "await", freed, "alloc", "1M")
    world.wait_for_file(late_ready)
    free_slot(ledger, 700)
    open(freed, "w").close()
    out, err = late.communicate(timeout=30)
    open(done, "w").close()
    holder.communicate(timeout=30)
    assert late.returncode == 0, err  # neither killed nor hung
    # Refused, not a private ledger with the whole 64 MiB; joined once a
    # slot came free.
    assert [l.split()[1] for l in out.splitlines() if l.startswith("alloc")] == ["oom", "oom", "ok"], out + err
    assert err.count("DEVICE MEMORY IS REFUSED") == 1, err
    assert "1024 live processes" in err and "split the work across vGPUs" in err, err


def test_1030_idle_forked_children_fill_the_ledger_and_the_next_process_is_refused(world):
    """The issue's reproduction, with real processes: a process of the vGPU
    forks 1030 idle children; each joins the ledger as it is forked."""
    ready, release, released, done = (world.path(n) for n in ("ready", "release", "released", "done"))
    holder = world.start("run", "--name", "forks", "--memory", "64MiB", "--", CUDA_APP, "init", "alloc", "8M",
                         "forkidle", "1030", "ready", ready, "await", release, "releaseforks", "ready", released,
                         "await", done)
    world.wait_for_file(ready, timeout=60)
    # The children claim their slots in their own processes, after fork
    # returns in the parent: `ready` can come before the last claims, and a
    # process started then took a slot a child would have had (CI saw 8
    # children refused). Every slot taken, the late process is refused for
    # certain.
    deadline = time.monotonic() + 60
    while len(json.loads(world.gpuslice("ls", "--json", "forks").stdout)["vgpus"][0]["processes"]) < 1024:
        assert time.monotonic() < deadline, "the ledger never filled"
        time.sleep(0.05)  # a poll of the ledger, not a wait for an event
    late_ready, go = world.path("late-ready"), world.path("go")
    late = world.start("run", "--name", "forks", "--", CUDA_APP, "init", "alloc", "1M", "ready", late_ready,
                       "await", go, "alloc", "1M")
    world.wait_for_file(late_ready)
    open(release, "w").close()
    world.wait_for_file(released, timeout=60)  # every child has exited and been waited for
    open(go, "w").close()
    out, err = late.communicate(timeout=60)
    open(done, "w").close()
    holder_out, holder_err = holder.communicate(timeout=60)
    assert "forkidle 1030" in holder_out and "releaseforks 1030" in holder_out, holder_out + holder_err
    # The children that found no slot were told so, not given a private ledger.
    assert holder_err.count("this forked child could not join") == 1030 - 1023, holder_err[-2000:]
    assert late.returncode == 0, err
    # Refused while the ledger was full; joined once the children were gone.
    assert [l.split()[1] for l in out.splitlines() if l.startswith("alloc")] == ["oom", "ok"], out + err
    assert err.count("DEVICE MEMORY IS REFUSED") == 1, err


def corrupt(path, offset=0):
    """Flips one byte of a file the tenant can write (the ledger), or that
    its owner can make writable (the limits)."""
    mode = os.stat(path).st_mode
    os.chmod(path, 0o600)
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))
    os.chmod(path, mode)


def raw_app(world, name, args):
    """A process of vGPU NAME that no `gpuslice run` holds (as a container's
    processes are: the plugin set them up)."""
    env = dict(world.env)
    env.update({"GPUSLICE_VGPU_DIR": vgpu_dir(world, name), "LD_PRELOAD": LIBRARY, "LD_LIBRARY_PATH": FAKE_DIR})
    return subprocess.Popen([CUDA_APP, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def start_vgpu(world, name):
    ready, done = world.path(name + "-ready"), world.path(name + "-done")
    holder = world.start("run", "--name", name, "--memory", "64MiB", "--", CUDA_APP, "init", "alloc", "8M",
                         "ready", ready, "await", done)
    world.wait_for_file(ready)
    return holder, done


def test_a_corrupt_ledger_refuses_device_memory_and_shows_as_corrupt(world):
    holder, done = start_vgpu(world, "bad")
    member_ready, member_done = world.path("member-ready"), world.path("member-done")
    member = raw_app(world, "bad", ["init", "alloc", "4M", "ready", member_ready, "await", member_done])
    world.started.append(member)  # ended by the fixture should the test fail
    world.wait_for_file(member_ready)
    corrupt(os.path.join(vgpu_dir(world, "bad"), "ledger"), offset=3)  # the magic

    # A process that starts now (a container's): refused, not a private
    # ledger with the whole 64 MiB.
    late = raw_app(world, "bad", ["init", "alloc", "1M", "alloc", "1M"])
    out, err = late.communicate(timeout=30)
    assert late.returncode == 0, err
    assert [l.split()[1] for l in out.splitlines() if l.startswith("alloc")] == ["oom", "oom"], out + err
    assert err.count("DEVICE MEMORY IS REFUSED") == 1, err
    assert "corrupted (ledger: bad magic)" in err and "delete" in err, err
    # `gpuslice run` will not join it, and says why.
    joined = world.app(["--name", "bad"], ["init"])
    assert joined.returncode == 2 and "corrupted (ledger: bad magic)" in joined.stderr, joined.stderr

    listed = world.gpuslice("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    vgpus = {v["name"]: v for v in json.loads(listed.stdout)["vgpus"]}
    assert vgpus["bad"]["state"] == "corrupt", listed.stdout
    table = world.gpuslice("ls")
    assert any(l.split()[:1] == ["bad"] and "corrupt" in l for l in table.stdout.splitlines()), table.stdout

    # The holder's `gpuslice run` ends: the vGPU cannot be told unused (its
    # ledger cannot be read) and the member still runs, so it stays.
    open(done, "w").close()
    holder.communicate(timeout=30)
    assert os.path.isdir(vgpu_dir(world, "bad"))
    open(member_done, "w").close()
    member.communicate(timeout=30)


def test_corrupt_limits_refuse_device_memory(world):
    holder, done = start_vgpu(world, "badlimits")
    corrupt(os.path.join(vgpu_dir(world, "badlimits"), "limits"), offset=0)
    env = dict(world.env)
    env.update({"GPUSLICE_VGPU_DIR": vgpu_dir(world, "badlimits"), "LD_PRELOAD": LIBRARY,
                "LD_LIBRARY_PATH": FAKE_DIR})
    r = subprocess.run([CUDA_APP, "init", "alloc", "1M", "managed", "1M"], env=env, capture_output=True, text=True,
                       timeout=30)
    open(done, "w").close()
    holder.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    assert "alloc oom" in r.stdout and "managed oom" in r.stdout, r.stdout
    assert r.stderr.count("DEVICE MEMORY IS REFUSED") == 1, r.stderr
    assert "NO MEMORY LIMIT" not in r.stderr


def busy_word(pid, ns):
    return (1 << 63) | ((pid & 0x7FFFFFFF) << 32) | (ns & 0xFFFFFFFF)


def test_a_reclaim_whose_reaper_was_killed_is_redone(world):
    """The reaper died after taking a dead process's slot, before freeing
    it: the slot is busy in its name with 100 KiB still charged."""
    holder, done = start_vgpu(world, "redo")
    gone = subprocess.Popen(["true"])
    gone.wait()
    _, _, ns = my_identity()
    path = os.path.join(vgpu_dir(world, "redo"), "ledger")
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        base = LEDGER_SLOTS + 5 * SLOT_SIZE
        struct.pack_into("<Q", m, base + SLOT_USED, 100 << 10)
        struct.pack_into("<Q", m, base + SLOT_OWNER, busy_word(gone.pid, ns))
        struct.pack_into("<I", m, LEDGER_HIGH_WATER, 6)
    # 56 MiB fits next to the holder's 8 MiB only with the 100 KiB back.
    r = world.app(["--name", "redo"], ["init", "alloc", "56M"])
    with open(path, "rb") as f:
        data = f.read()
    open(done, "w").close()
    holder.communicate(timeout=30)
    assert alloc_results(r) == ["ok"], r.stdout + r.stderr
    assert struct.unpack_from("<Q", data, LEDGER_SLOTS + 5 * SLOT_SIZE + SLOT_OWNER)[0] == 0
