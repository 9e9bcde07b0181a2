"""The daemon as a process: start-up refusals, the socket, `gpuslice run`
through the daemon, and garbage collection of what runs leave behind."""
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from conftest import GPUSLICE, MiB, poll, value


def test_socket_is_owner_only_and_a_second_daemon_is_refused(dworld):
    d = dworld.daemon()
    mode = os.stat(dworld.socket).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(os.stat(dworld.state).st_mode) == 0o700
    second = subprocess.run([GPUSLICE, "daemon", "--metrics-address", "127.0.0.1:0"], env=dworld.env,
                            capture_output=True, text=True, timeout=30)
    assert second.returncode == 2
    assert f"another gpuslice daemon (pid {d.proc.pid})" in second.stderr
    # The refusal left the first daemon serving.
    assert dworld.gpuslice("ls").returncode == 0
    assert "daemon pid" in dworld.gpuslice("top", "--once").stdout


def test_a_live_socket_on_another_state_dir_is_refused_and_a_stale_one_replaced(dworld):
    dworld.daemon()
    other_state = dworld.state + "-other"
    clash = subprocess.run([GPUSLICE, "daemon", "--state-dir", other_state, "--socket", dworld.socket,
                            "--metrics-address", "127.0.0.1:0"],
                           env=dworld.env, capture_output=True, text=True, timeout=30)
    assert clash.returncode == 2
    assert "another gpuslice daemon is already serving on " + dworld.socket in clash.stderr
    dworld.daemons[0].kill9()
    assert os.path.exists(dworld.socket)  # stale: nobody accepts on it
    d2 = dworld.daemon()
    assert dworld.gpuslice("ls").returncode == 0


def test_run_goes_through_the_daemon_which_creates_the_vgpu(dworld):
    d = dworld.daemon()
    ready, go = dworld.path("ready"), dworld.path("go")
    run = dworld.start("run", "--name", "via", "--memory", "64MiB", "--",
                       *dworld.app_cmd(["init", "alloc", "40M", "ready", ready, "await", go, "fill", "1M"]))
    pid = int(dworld.wait_for_file(ready))
    assert "created vGPU 'via' (ephemeral, 1 GPU(s), memory 64 MiB)" in d.text()
    v = dworld.ls("via")["via"]
    assert v["devices"][0]["memory_limit_bytes"] == 64 * MiB
    assert v["devices"][0]["memory_used_bytes"] == 40 * MiB
    assert [p["pid"] for p in v["processes"]] == [pid]
    assert v["has_members"] is True
    open(go, "w").close()
    out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err
    assert value(subprocess.CompletedProcess([], 0, out, err), "fill") == 24 * MiB
    # The run released the vGPU as it left, and the daemon removed it.
    poll(lambda: not os.path.exists(dworld.vgpu_dir("via")), 5, "vGPU removed")
    assert "deleted vGPU 'via'" in d.text()


def test_runs_sharing_a_name_share_one_account_through_the_daemon(dworld):
    dworld.daemon()
    ready, go = dworld.path("ready"), dworld.path("go")
    first = dworld.start("run", "--name", "shared", "--memory", "64MiB", "--",
                         *dworld.app_cmd(["init", "alloc", "40M", "ready", ready, "await", go]))
    dworld.wait_for_file(ready)
    second = dworld.gpuslice("run", "--name", "shared", "--", *dworld.app_cmd(["init", "fill", "1M"]))
    assert second.returncode == 0, second.stderr
    assert value(second, "fill") == 24 * MiB
    conflict = dworld.gpuslice("run", "--name", "shared", "--memory", "1GiB", "--", "true")
    assert conflict.returncode == 2
    assert "already exists with a 64 MiB memory limit" in conflict.stderr
    open(go, "w").close()
    first.communicate(timeout=30)
    assert first.returncode == 0


def test_the_daemon_applies_its_configured_defaults(dworld):
    cfg = dworld.path("config.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\ndefaults:\n  memory: 32MiB\n  compute: 40\n")
    dworld.daemon(["--config", cfg])
    r = dworld.gpuslice("run", "--name", "dflt", "--", *dworld.app_cmd(["init", "meminfo"]))
    assert r.returncode == 0, r.stderr
    assert value(r, "meminfo", 2) == 32 * MiB


def test_a_bad_config_is_refused_with_file_and_line(dworld):
    cfg = dworld.path("bad.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\nsocket:\n  paht: /tmp/x.sock\n")
    r = subprocess.run([GPUSLICE, "daemon", "--config", cfg], env=dworld.env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2
    assert "bad.yaml:3" in r.stderr and "paht" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_run_without_a_daemon_stays_standalone_even_with_a_stale_socket(dworld):
    d = dworld.daemon()
    d.kill9()
    assert os.path.exists(dworld.socket)
    r = dworld.gpuslice("run", "--name", "alone", "--memory", "64MiB", "--",
                        *dworld.app_cmd(["init", "fill", "1M"]))
    assert r.returncode == 0, r.stderr
    assert value(r, "fill") == 64 * MiB
    assert not os.path.exists(dworld.vgpu_dir("alone"))


def hold_lock(dworld, name):
    """Holds the state directory's lock `name` as a stopped daemon caught
    using it would. Taken while the daemon still runs, so a pass of its own
    that holds the lock ends first: the daemon is then stopped holding
    nothing, and the lock is this test's for certain. (Taken after the stop,
    a daemon thread inside a syscall when the stop came could still release
    it: CI saw the run get the lock it should have waited for.)"""
    f = open(os.path.join(dworld.state, name), "a")

    def take():
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    poll(take, timeout=30, what=f"{name} free of the running daemon's pass")
    return f


@pytest.mark.parametrize("held", [None, ".schedule.lock"])
def test_run_goes_on_standalone_when_the_daemon_accepts_but_does_not_answer(dworld, held):
    # A hung (here: stopped) daemon still has its socket accept connections,
    # so the run finds it "running"; the creation's deadline then passes and
    # the run goes on without it, limits and all, instead of exiting 2. One
    # stopped in a schedule pass also holds the node's schedule lock: the run
    # waits for it a bounded time, then goes on without the pass, saying so.
    d = dworld.daemon()
    lock = hold_lock(dworld, held) if held else None
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        r = dworld.gpuslice("run", "--name", "unanswered", "--memory", "64MiB", "--",
                            *dworld.app_cmd(["init", "fill", "1M"]), timeout=90)
    finally:
        if lock:
            lock.close()
        os.kill(d.proc.pid, signal.SIGCONT)
    assert r.returncode == 0, r.stderr
    assert "did not answer" in r.stderr and "running vGPU 'unanswered' without the daemon" in r.stderr, r.stderr
    if held:
        assert f"compute schedule not updated: {dworld.state}/{held} is still locked after 5000 ms" in r.stderr, \
            r.stderr
    assert value(r, "fill") == 64 * MiB
    # The daemon, answering again, serves as before.
    assert dworld.gpuslice("ls").returncode == 0


def test_a_run_behind_a_stopped_daemons_store_lock_fails_clearly_instead_of_hanging(dworld):
    # Without the store lock no vGPU can be made, so the run cannot go on:
    # it ends, naming the lock and the fix, before the app starts.
    d = dworld.daemon()
    lock = hold_lock(dworld, ".lock")
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        r = dworld.gpuslice("run", "--name", "unanswered", "--memory", "64MiB", "--",
                            *dworld.app_cmd(["init", "fill", "1M"]), timeout=90)
    finally:
        lock.close()
        os.kill(d.proc.pid, signal.SIGCONT)
    assert r.returncode == 2, r.stderr
    assert f"{dworld.state}/.lock is still locked after 5000 ms by pid {os.getpid()}" in r.stderr, r.stderr
    assert "systemctl status gpuslice" in r.stderr
    assert "fill" not in r.stdout


def test_a_user_who_may_not_read_the_state_directory_is_told_so_not_shown_no_vgpus(dworld):
    # The daemon's state directory is its owner's (0700); another user, who
    # cannot reach the daemon's socket either, reads it directly and gets a
    # permission error naming it, not an empty list.
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    dworld.daemon()
    # The binary, where the other user can run it whatever the checkout's
    # modes (a clone may sit in a 0700 directory).
    bindir = tempfile.mkdtemp(prefix="gpuslice-bin-")
    os.chmod(bindir, 0o755)
    binary = shutil.copy(GPUSLICE, bindir)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary]
    for command in (["ls"], ["top", "--once"]):
        r = subprocess.run(nobody + command + ["--state-dir", dworld.state], env=dworld.env, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2, (command, r.stdout, r.stderr)
        assert f"cannot read {dworld.state}" in r.stderr and "Permission denied" in r.stderr, r.stderr
        assert "no vGPUs" not in r.stdout
    shutil.rmtree(bindir)


def test_sigterm_to_runs_reaches_their_commands(dworld):
    # `gpuslice run` through the daemon has gRPC threads; a SIGTERM must
    # still be forwarded to the command, never kill the run and orphan it.
    dworld.daemon()
    runs, readies = [], []
    for i in range(20):
        ready = dworld.path(f"r{i}")
        readies.append(ready)
        runs.append(dworld.start("run", "--name", f"sig{i % 4}", "--", *dworld.app_cmd(["init", "ready", ready,
                                                                                       "hold"])))
    app_pids = [int(dworld.wait_for_file(r)) for r in readies]
    for r in runs:
        r.send_signal(signal.SIGTERM)
    codes = [r.wait(timeout=30) for r in runs]
    assert codes == [128 + signal.SIGTERM] * len(runs)

    def gone(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(")")[-1].split()[0] == "Z"
        except OSError:
            return True
    poll(lambda: all(gone(p) for p in app_pids), 5, "every command ended")


def test_sigterm_stops_the_daemon_cleanly_and_running_apps_keep_their_vgpu(dworld):
    d = dworld.daemon()
    ready = dworld.path("ready")
    app = dworld.start("run", "--name", "stays", "--memory", "64MiB", "--",
                       *dworld.app_cmd(["init", "alloc", "8M", "ready", ready, "hold"]))
    dworld.wait_for_file(ready)
    d.stop()
    assert d.proc.returncode == 0
    assert "stopping on signal 15" in d.text()
    assert not os.path.exists(dworld.socket)
    assert os.path.exists(dworld.vgpu_dir("stays"))  # the state is not the daemon's to take along
    assert dworld.ls("stays")["stays"]["devices"][0]["memory_used_bytes"] == 8 * MiB
    app.send_signal(signal.SIGTERM)
    assert app.wait(timeout=30) == 128 + signal.SIGTERM


def test_a_group_is_refused_on_a_state_directory_holding_pods_vgpus(dworld):
    """Pods' vGPU directories are open to every uid (k8s/pod_state_dir.h); a
    daemon that opened their state directory to its socket.group would let
    that group's users reach every pod's socket. The plugins mark their
    state directory; the daemon then refuses the group, and says what to do."""
    state = dworld.env["GPUSLICE_STATE_DIR"]
    os.makedirs(state, exist_ok=True)
    open(os.path.join(state, "kubernetes-pods"), "w").close()
    cfg = dworld.path("group.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\nsocket:\n  group: root\n")
    r = subprocess.run([GPUSLICE, "daemon", "--config", cfg], env=dworld.env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, r.stderr
    assert "Kubernetes pods' vGPUs" in r.stderr and "state_dir of its own" in r.stderr, r.stderr
    assert (os.stat(state).st_mode & 0o777) != 0o710, "the directory was not opened to the group"
