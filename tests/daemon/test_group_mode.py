"""A daemon opened to a group (`socket.group`) serves several users on one
socket. Each vGPU belongs to the user who made it (node/vgpu_owner.h), as
the kernel names the caller on the control socket
(daemon/control_listener.h): another member may list it, but not resize,
suspend, join or delete it, nor open its state.

The users are made-up uids in a made-up group (setpriv needs no account);
the tests need root, as a group-mode daemon giving files to users does."""
import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import CUDA_APP, GPUSLICE, MiB, poll, _integration

FAKE_DIR = _integration.FAKE_DIR

LIBRARY = os.path.join(os.path.dirname(os.path.dirname(GPUSLICE)), "lib", "libgpuslice-cuda.so")

GROUP, ALICE, BOB = 4242, 4201, 4202


@pytest.fixture
def group_world(dworld):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux)")
    # Members reach the state directory through its parent, and run a copy of
    # the binary whatever the checkout's modes.
    os.chmod(os.path.dirname(dworld.state), 0o711)
    bindir = tempfile.mkdtemp(prefix="gpuslice-bin-")
    os.chmod(bindir, 0o755)
    for sub, src in (("bin", GPUSLICE), ("bin", CUDA_APP), ("lib", LIBRARY)):
        os.makedirs(os.path.join(bindir, sub), mode=0o755, exist_ok=True)
        shutil.copy(src, os.path.join(bindir, sub))
    shutil.copytree(FAKE_DIR, os.path.join(bindir, "fake_driver"), symlinks=True)
    dworld.member_binary = os.path.join(bindir, "bin", "gpuslice")
    dworld.member_app = os.path.join(bindir, "bin", "cuda_app")
    # The fakes, from where members can read them.
    dworld.member_env = dict(dworld.env)
    for key in ("GPUSLICE_REAL_DRIVER", "GPUSLICE_REAL_NVML", "LD_LIBRARY_PATH"):
        dworld.member_env[key] = dworld.env[key].replace(FAKE_DIR, os.path.join(bindir, "fake_driver"))
    cfg = dworld.path("group.yaml")
    with open(cfg, "w") as f:
        f.write(f"version: 1\nsocket:\n  group: \"{GROUP}\"\n")
    dworld.daemon(["--config", cfg])
    yield dworld
    shutil.rmtree(bindir)


def as_user(uid, *command):
    return ["setpriv", f"--reuid={uid}", f"--regid={GROUP}", "--clear-groups", *command]


def member(world, uid, *args):
    return subprocess.run(as_user(uid, world.member_binary, *args), env=world.member_env, capture_output=True,
                          text=True, timeout=60)


def start_member_vgpu(world, uid, name):
    """`gpuslice run --name NAME` as `uid`, holding the vGPU until the test ends."""
    p = subprocess.Popen(as_user(uid, world.member_binary, "run", "--name", name, "--memory", "64MiB", "--",
                                 "sleep", "600"),
                         env=world.member_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    world.procs.append(p)

    def made():
        assert p.poll() is None, p.stderr.read()
        return name in world.ls()
    poll(made, 30, f"{name} made by uid {uid}")
    return p


def test_a_member_cannot_change_join_or_delete_another_members_vgpu(group_world):
    w = group_world
    start_member_vgpu(w, ALICE, "alices")
    assert w.ls()["alices"]["devices"][0]["memory_limit_bytes"] == 64 * MiB
    assert w.ls()["alices"]["owner_uid"] == ALICE

    for args, verb in ((["set", "alices", "--memory", "1MiB", "--force"], "resize"),
                       (["set", "alices", "--compute", "10"], "resize"),
                       (["suspend", "alices"], "suspend"),
                       (["resume", "alices"], "resume"),
                       (["run", "--name", "alices", "--", "true"], "join")):
        r = member(w, BOB, *args)
        assert r.returncode != 0, (args, r.stdout, r.stderr)
        assert f"cannot {verb} vGPU 'alices': it belongs to uid {ALICE}" in r.stderr, (args, r.stderr)
    d = w.ls()["alices"]["devices"][0]
    assert d["memory_limit_bytes"] == 64 * MiB and d["compute_share_pct"] == 100

    # Bob may list it, and make his own.
    assert "alices" in member(w, BOB, "ls").stdout
    # The owner and the operator may change it.
    assert member(w, ALICE, "set", "alices", "--compute", "50").returncode == 0
    assert w.gpuslice("set", "alices", "--compute", "60").returncode == 0
    assert w.ls()["alices"]["devices"][0]["compute_share_pct"] == 60


def test_a_member_cannot_open_another_members_vgpu_state(group_world):
    """The state socket hands out the vGPU's ledger (core/state_handout.h);
    the members lock keeps an ephemeral vGPU alive. Both are the owner's
    alone, while the directory stays open to the group."""
    w = group_world
    start_member_vgpu(w, ALICE, "alices")
    d = w.vgpu_dir("alices")
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({os.path.join(d, 'state.sock')!r}); print('socket open')\n"
        "except PermissionError: print('socket refused')\n"
        "try:\n"
        f"    open({os.path.join(d, 'members')!r}, 'r+'); print('members open')\n"
        "except PermissionError: print('members refused')\n"
        f"print('limits', len(open({os.path.join(d, 'limits')!r}, 'rb').read()) > 0)\n")
    for uid, expected in ((BOB, "socket refused\nmembers refused\nlimits True\n"),
                          (ALICE, "socket open\nmembers open\nlimits True\n")):
        r = subprocess.run(as_user(uid, "/usr/bin/python3", "-c", probe), capture_output=True, text=True, timeout=30)
        assert r.stdout == expected, (uid, r.stdout, r.stderr)


def test_the_owner_is_the_creators_uid_in_a_file_members_cannot_write(group_world):
    """The owner is the uid SO_PEERCRED gave for the creating call, kept in
    a file of the daemon's that members cannot write."""
    w = group_world
    start_member_vgpu(w, BOB, "bobs")
    owner = os.path.join(w.vgpu_dir("bobs"), "owner")
    with open(owner) as f:
        assert f.read() == f"{BOB}\n"
    st = os.stat(owner)
    assert st.st_uid == 0 and (st.st_mode & 0o222) == 0
    r = subprocess.run(as_user(BOB, "/bin/sh", "-c", f"echo {ALICE} > {owner}"), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0


def test_a_state_socket_served_again_by_a_new_keeper_stays_its_owners(group_world):
    """A killed state keeper is replaced, and every vGPU's socket made
    again at its path (node/state_keeper_client.h): still the owner's alone."""
    w = group_world
    start_member_vgpu(w, ALICE, "alices")
    sock = os.path.join(w.vgpu_dir("alices"), "state.sock")
    d = w.daemons[-1]
    keeper = int(re.search(r"state keeper (\d+)", d.text()).group(1))
    os.kill(keeper, signal.SIGKILL)
    poll(lambda: "handed 1 vGPU(s)" in d.text(), 10, "the state handed to a new keeper")
    after = os.stat(sock)
    assert (after.st_uid, after.st_gid, after.st_mode & 0o777) == (ALICE, GROUP, 0o600)


def test_a_members_application_is_paced_and_charged_in_its_own_vgpu(group_world):
    """A member's application gets its vGPU's ledger and its GPU's board
    through the state socket the member owns: its cap is enforced (no
    "NOT enforced" warning) and its memory is charged."""
    w = group_world
    r = member(w, ALICE, "run", "--name", "capped", "--memory", "4MiB", "--compute-cap", "30", "--",
               w.member_app, "init", "alloc", "2M", "alloc", "8M", "spin", "0.2", "/dev/null")
    assert r.returncode == 0, r.stderr
    assert "NOT enforced" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[:3] == ["init ok", "alloc ok", "alloc oom"], r.stdout
    assert r.stdout.splitlines()[3].startswith("spin ok"), r.stdout


def test_a_member_is_told_when_the_daemon_does_not_answer(group_world):
    """Members reach the vGPUs only through the daemon: with it stopped,
    `ls` says so, instead of asking them to join the group they are in."""
    w = group_world
    start_member_vgpu(w, ALICE, "alices")
    w.daemons[-1].stop()
    r = member(w, BOB, "ls")
    assert r.returncode == 2
    assert "the daemon that serves it for its group did not answer" in r.stderr, r.stderr
    assert "membership" not in r.stderr
