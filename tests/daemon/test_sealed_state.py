"""Issue 11, "SIGBUS by truncation": a daemon-made vGPU's ledger and its
GPUs' pacing boards are sealed memfds handed out by the state keeper
(core/state_handout.h, node/state_keeper.h), so no tenant can resize
memory that others map.

Real processes on the fake driver: the daemon, `gpuslice run`, cuda_app
under the library, and a hostile Python process of another vGPU
(tenant_truncate.py)."""
import json
import mmap
import os
import re
import signal
import socket
import struct
import subprocess
import sys

from conftest import CUDA_APP, MiB, lines, poll

LIBRARY = os.path.join(os.path.dirname(CUDA_APP), "..", "lib", "libgpuslice-cuda.so")
TENANT = os.path.join(os.path.dirname(__file__), "tenant_truncate.py")


def words(text, command):
    """The lines cuda_app printed for COMMAND, split into words."""
    return [l.split() for l in text.splitlines() if l.split()[:1] == [command]]


def keeper_pid(daemon):
    m = re.search(r"state keeper (\d+)", daemon.text())
    assert m, daemon.text()
    return int(m.group(1))


def keeper_pid_latest(daemon):
    return int(re.findall(r"state keeper (\d+)", daemon.text())[-1])


def used(dworld, name):
    return dworld.ls(name)[name]["devices"][0]["memory_used_bytes"]


def test_a_tenant_cannot_truncate_the_board_or_ledger_under_others(dworld):
    d = dworld.daemon()
    ready, go, again, done = (dworld.path(n) for n in ("ready", "go", "again", "done"))
    # The victim shares GPU 0 (and so its board) with the attacker, charges
    # its ledger before and after the attack, and reads the board after it.
    victim = dworld.start("run", "--name", "victim", "--memory", "256MiB", "--compute", "50", "--",
                          *dworld.app_cmd(["init", "alloc", "16M", "ready", ready, "await", go, "alloc", "16M",
                                           "board", "ready", again, "await", done]))
    dworld.wait_for_file(ready)
    assert used(dworld, "victim") == 16 * MiB

    attacker = dworld.gpuslice("run", "--name", "attacker", "--memory", "256MiB", "--compute", "50", "--",
                               sys.executable, TENANT)
    assert attacker.returncode == 0, attacker.stderr
    attempts = json.loads(attacker.stdout)["attempts"]
    # Nothing it could reach was resized: no file holds the state, and every
    # descriptor of it refuses.
    assert attempts, "the attacker found nothing to try"
    assert not [a for a in attempts if a[0].startswith("file ")], attempts
    handed = [a for a in attempts if a[0].startswith(("handed", "reopened"))]
    assert {a[0].split()[1] for a in handed} == {"ledger", "board"}, attempts
    assert all(result == "EPERM" for _, result in handed), attempts
    assert all(result != "truncated" for _, result in attempts), attempts

    open(go, "w").close()
    dworld.wait_for_file(again)
    # The victim lives, is still accounted (its second charge), still on the board.
    assert used(dworld, "victim") == 32 * MiB
    open(done, "w").close()
    out, err = victim.communicate(timeout=30)
    assert victim.returncode == 0, (victim.returncode, err)
    assert words(out, "alloc") == [["alloc", "ok"], ["alloc", "ok"]]
    assert words(out, "board") and [w for w in words(out, "board") if w[1] == "none"] == [], out
    # And the daemon lives and reads every vGPU.
    assert d.proc.poll() is None, d.text()
    assert "corrupt" not in json.dumps(dworld.ls())


def test_a_restarted_daemon_and_new_processes_share_the_ledger_running_ones_charge(dworld):
    d = dworld.daemon()
    ready, done = dworld.path("ready"), dworld.path("done")
    first = dworld.start("run", "--name", "keep", "--memory", "64MiB", "--",
                         *dworld.app_cmd(["init", "alloc", "40M", "ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    assert not os.path.lexists(os.path.join(dworld.vgpu_dir("keep"), "ledger"))  # sealed, not a file
    keeper = keeper_pid(d)

    d.kill9()
    d2 = dworld.daemon()
    assert keeper_pid(d2) == keeper  # found, not started again
    assert used(dworld, "keep") == 40 * MiB  # the restarted daemon reads the memory the app charges
    # A process started after the restart charges the same ledger: 40 + 32 > 64.
    second = dworld.app(["--name", "keep"], ["init", "alloc", "32M", "alloc", "16M"], lookup="procaddress")
    assert second.returncode == 0, second.stderr
    assert lines(second, "alloc") == [["alloc", "oom"], ["alloc", "ok"]]
    open(done, "w").close()
    first.communicate(timeout=30)
    assert first.returncode == 0


def test_a_killed_keeper_is_replaced_with_the_same_memory(dworld):
    d = dworld.daemon()
    ready, done = dworld.path("ready"), dworld.path("done")
    first = dworld.start("run", "--name", "k", "--memory", "64MiB", "--",
                         *dworld.app_cmd(["init", "alloc", "40M", "ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    keeper = keeper_pid(d)
    os.kill(keeper, signal.SIGKILL)
    # The daemon's housekeeping notices, starts another and hands it the state.
    poll(lambda: "handed 1 vGPU(s)" in d.text(), 10, "the state handed to a new keeper")
    assert keeper_pid_latest(d) != keeper
    second = dworld.app(["--name", "k"], ["init", "alloc", "32M", "alloc", "16M"], lookup="procaddress")
    assert second.returncode == 0, second.stderr
    assert lines(second, "alloc") == [["alloc", "oom"], ["alloc", "ok"]]  # the same ledger as the first
    open(done, "w").close()
    first.communicate(timeout=30)
    assert first.returncode == 0
    assert d.proc.poll() is None


def test_when_daemon_and_keeper_both_die_the_ledger_is_recovered_from_a_running_app(dworld):
    """Both killed (a Kubernetes rollout restarts the plugin and the keeper
    together): the ledger lives on only in the running app's mapping. The
    next daemon finds it there by the vGPU's state.record
    (node/state_recovery.h) and serves the same memory again, so a new
    process charges the ledger the running one does."""
    d = dworld.daemon()
    ready, done = dworld.path("ready"), dworld.path("done")
    first = dworld.start("run", "--name", "lost", "--memory", "64MiB", "--",
                         *dworld.app_cmd(["init", "alloc", "40M", "ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    assert os.path.exists(os.path.join(dworld.vgpu_dir("lost"), "state.record"))
    keeper = keeper_pid(d)
    d.kill9()
    os.kill(keeper, signal.SIGKILL)

    d2 = dworld.daemon()
    assert keeper_pid_latest(d2) != keeper
    if "recovered its ledger" not in d2.text():
        assert "CAP_SYS_ADMIN" in d2.text(), d2.text()  # a CI container without it: said plainly
        open(done, "w").close()
        first.communicate(timeout=30)
        return
    assert used(dworld, "lost") == 40 * MiB
    second = dworld.app(["--name", "lost"], ["init", "alloc", "32M", "alloc", "16M"], lookup="procaddress")
    assert second.returncode == 0, second.stderr
    assert lines(second, "alloc") == [["alloc", "oom"], ["alloc", "ok"]]  # 40 + 32 > 64: one ledger
    open(done, "w").close()
    first.communicate(timeout=30)
    assert first.returncode == 0


def test_a_state_socket_that_does_not_answer_refuses_memory_and_leaves_compute_running(dworld):
    d = dworld.daemon()
    ready, done = dworld.path("ready"), dworld.path("done")
    holder = dworld.start("run", "--name", "mute", "--memory", "64MiB", "--",
                          *dworld.app_cmd(["init", "alloc", "1M", "ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    env = dict(dworld.env)
    # As a container's process: the library, pointed at its vGPU, no `gpuslice run`.
    env.update({"GPUSLICE_VGPU_DIR": dworld.vgpu_dir("mute"), "LD_PRELOAD": LIBRARY})
    keeper = keeper_pid(d)
    os.kill(keeper, signal.SIGSTOP)  # the socket still accepts, nobody answers
    try:
        p = subprocess.run([CUDA_APP, "init", "alloc", "1M", "spin", "0.05", os.devnull], env=env,
                           capture_output=True, text=True, timeout=60)
    finally:
        os.kill(keeper, signal.SIGCONT)
    assert p.returncode == 0, p.stderr
    assert lines(p, "alloc") == [["alloc", "oom"]]  # memory fails closed
    assert lines(p, "spin")[0][1] == "ok"            # compute fails open
    refused = [l for l in p.stderr.splitlines() if "DEVICE MEMORY IS REFUSED" in l]
    assert len(refused) == 1 and "did not hand out its shared state" in refused[0], p.stderr
    open(done, "w").close()
    holder.communicate(timeout=30)
    assert holder.returncode == 0


def test_without_a_state_socket_the_library_uses_the_files_as_before(dworld):
    """Standalone `gpuslice run` (no daemon) keeps files: one user's own
    processes have no boundary between them (docs/design.md)."""
    ready, done = dworld.path("ready"), dworld.path("done")
    app = dworld.start("run", "--name", "plain", "--memory", "64MiB", "--",
                       *dworld.app_cmd(["init", "alloc", "80M", "alloc", "32M", "ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    vgpu = dworld.vgpu_dir("plain")
    assert os.path.exists(os.path.join(vgpu, "ledger")) and not os.path.exists(os.path.join(vgpu, "state.sock"))
    open(done, "w").close()
    out, err = app.communicate(timeout=30)
    assert app.returncode == 0, err
    assert words(out, "alloc") == [["alloc", "oom"], ["alloc", "ok"]]


BOARD_VERSION_AT = 8  # a board begins with core::FileHeader: magic, then the version (core/vgpu_layout.h)


def handed_boards(vgpu_dir):
    """What the vGPU's state socket hands out now: [(name, fd)] of its boards."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(os.path.join(vgpu_dir, "state.sock"))
        text, fds, _, _ = socket.recv_fds(s, 4096, 64)
    named = list(zip(text.decode().splitlines()[1:], fds))
    for name, fd in named:
        if not name.startswith("board"):
            os.close(fd)
    return [(name, fd) for name, fd in named if name.startswith("board")]


def board_versions(vgpu_dir, set_to=None):
    """The version word of each board handed out (first rewritten to
    `set_to`, as an earlier gpuslice would have made the board)."""
    versions = []
    for _, fd in handed_boards(vgpu_dir):
        with mmap.mmap(fd, os.fstat(fd).st_size) as m:
            if set_to is not None:
                m[BOARD_VERSION_AT:BOARD_VERSION_AT + 4] = struct.pack("<I", set_to)
            versions.append(struct.unpack_from("<I", m, BOARD_VERSION_AT)[0])
        os.close(fd)
    return versions


def test_a_keeper_that_outlived_an_upgrade_hands_over_to_one_with_current_boards(dworld):
    """The systemd unit restarts the daemon alone (KillMode=process), so after
    an upgrade the keeper of the version before still holds its boards, which
    the new version's libraries refuse: they would run unpaced, caps not
    enforced. The new daemon gives everything to a new keeper with new boards;
    the ledger is the same memory, and the old keeper exits once it serves
    nothing."""
    d = dworld.daemon()
    ready, done = dworld.path("ready"), dworld.path("done")
    first = dworld.start("run", "--name", "up", "--memory", "64MiB", "--compute", "50", "--",
                         *dworld.app_cmd(["init", "alloc", "40M", "ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    keeper = keeper_pid(d)
    current = board_versions(dworld.vgpu_dir("up"))
    assert current, "the vGPU has no board"
    d.kill9()
    # The keeper's board, as the version before made it.
    assert board_versions(dworld.vgpu_dir("up"), set_to=current[0] - 1) == [current[0] - 1]

    d2 = dworld.daemon()
    poll(lambda: "handed 1 vGPU(s)" in d2.text(), 10, "the state handed to a new keeper")
    assert keeper_pid_latest(d2) != keeper
    assert board_versions(dworld.vgpu_dir("up")) == current, "the new keeper hands out the old board"
    # The old keeper lets go of what the new one serves, then exits.
    poll(lambda: not os.path.exists(f"/proc/{keeper}") or
         open(f"/proc/{keeper}/stat").read().split(")")[-1].split()[0] == "Z", 10, "the old keeper to exit")
    # A process started now charges the ledger the running one does: 40 + 32 > 64.
    # It paces on the new board: a library refuses a board of another version.
    second = dworld.app(["--name", "up"], ["init", "alloc", "32M", "alloc", "16M", "board"], lookup="procaddress")
    assert second.returncode == 0, second.stderr
    assert lines(second, "alloc") == [["alloc", "oom"], ["alloc", "ok"]]
    on_board = words(second.stdout, "board")
    assert on_board and all(w[1] != "none" for w in on_board), (second.stdout, second.stderr)
    open(done, "w").close()
    first.communicate(timeout=30)
    assert first.returncode == 0
    assert d2.proc.poll() is None
