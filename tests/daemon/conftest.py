"""Fixtures for the daemon tests: the integration tests' World (real CLI,
real library, fake driver), plus a `gpuslice daemon` run as a real process.

State directories live under a short /tmp path, because the control socket
sits in the state directory and a unix socket's path is limited to 107 bytes.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

import importlib.util

# The integration tests' conftest, under its own module name (both files are
# called conftest.py).
_spec = importlib.util.spec_from_file_location(
    "integration_conftest", os.path.join(os.path.dirname(__file__), "..", "integration", "conftest.py"))
_integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_integration)
CUDA_APP, GPUSLICE, MiB, World = _integration.CUDA_APP, _integration.GPUSLICE, _integration.MiB, _integration.World
lines, value = _integration.lines, _integration.value


def poll(condition, timeout=10.0, what="condition"):
    """Polls `condition` until it returns a truthy value; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout} s")
        time.sleep(0.01)


def scrape(port):
    """The daemon's /metrics page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def series(text, name):
    """{labels-string: value} of one metric family on a /metrics page."""
    out = {}
    for line in text.splitlines():
        m = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


class Daemon:
    """`gpuslice daemon` on the world's state directory, metrics on a free port."""

    def __init__(self, world, args=(), env=None):
        self.world = world
        self.log_path = world.path(f"daemon-{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([GPUSLICE, "daemon", "--metrics-address", "127.0.0.1:0", *args],
                                     env={**world.env, **(env or {})}, stdout=self.log, stderr=self.log)
        self.metrics_port = None
        self.args = list(args)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_ready(self, timeout=15.0):
        """Until the control socket accepts (the daemon is serving)."""
        path = os.path.join(self.world.state, "gpuslice.sock")

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.text()}")
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(path)
                except OSError:
                    return False
            # The socket answers before the last log line is written.
            return "serving on" in self.text() or "--log-level" in self.args
        poll(ready, timeout, "daemon ready")
        m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", self.text())
        self.metrics_port = int(m.group(1)) if m else None
        return self

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.log.close()


class DaemonWorld(World):
    def __init__(self, tmp_path, short_dir):
        super().__init__(tmp_path)
        self.state = os.path.join(short_dir, "state")
        self.env["GPUSLICE_STATE_DIR"] = self.state
        self.daemons = []
        self.procs = []

    @property
    def socket(self):
        return os.path.join(self.state, "gpuslice.sock")

    def daemon(self, args=(), env=None):
        d = Daemon(self, args, env).wait_ready()
        self.daemons.append(d)
        return d

    def start(self, *args, env=None):
        p = super().start(*args, env=env)
        self.procs.append(p)
        return p

    def app_cmd(self, commands):
        return [CUDA_APP, "--lookup=procaddress", *commands]

    def ls(self, name=None):
        import json
        r = self.gpuslice("ls", "--json", *([name] if name else []))
        assert r.returncode == 0, r.stderr
        return {v["name"]: v for v in json.loads(r.stdout)["vgpus"]}

    def vgpu_dir(self, name):
        return os.path.join(self.state, "vgpus", name)


@pytest.fixture
def dworld(tmp_path):
    short = tempfile.mkdtemp(prefix="gsd-", dir="/tmp")
    w = DaemonWorld(tmp_path, short)
    yield w
    # SIGTERM first: `gpuslice run` passes it to its application, which a
    # SIGKILL would leave running (a failed test's apps wait for files that
    # never appear).
    for p in w.procs:
        if p.poll() is None:
            p.terminate()
    for p in w.procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    for d in w.daemons:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(timeout=10)
        d.log.close()
    shutil.rmtree(short, ignore_errors=True)
