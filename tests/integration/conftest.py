"""Shared fixtures: where the build put things, and a clean vGPU world per test.

Every test runs real processes: the real `gpuslice` CLI, the real library,
and a scriptable CUDA application (cuda_app.cc) talking to the fake CUDA
driver and fake NVML (tests/fake_driver), which stand where the real ones do.
"""
import os
import subprocess
import time

import pytest

BUILD = os.environ.get("GPUSLICE_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
GPUSLICE = os.path.join(BUILD, "bin", "gpuslice")
CUDA_APP = os.path.join(BUILD, "bin", "cuda_app")
CUDA_APP_LINKED = os.path.join(BUILD, "bin", "cuda_app_linked")
FAKE_DIR = os.path.join(BUILD, "fake_driver")
FAKE_CUDA = os.path.join(FAKE_DIR, "libcuda.so.1")
FAKE_NVML = os.path.join(FAKE_DIR, "libnvidia-ml.so.1")

MiB = 1 << 20


class World:
    """A state directory and an environment in which the fakes are the driver."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.started = []
        self.env = dict(os.environ)
        for key in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "GPUSLICE_VGPU_DIR"):
            self.env.pop(key, None)
        self.env.update({
            "GPUSLICE_STATE_DIR": str(tmp_path / "state"),
            "GPUSLICE_REAL_DRIVER": FAKE_CUDA,
            "GPUSLICE_REAL_NVML": FAKE_NVML,
            # Preload mode: the application finds the (fake) driver by name.
            "LD_LIBRARY_PATH": FAKE_DIR,
            "FAKE_GPU_MEMORY": str(1024 * MiB),
        })

    def path(self, name):
        return str(self.tmp / name)

    def gpuslice(self, *args, env=None, timeout=30):
        return subprocess.run([GPUSLICE, *args], env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout)

    def start(self, *args, env=None):
        p = subprocess.Popen([GPUSLICE, *args], env={**self.env, **(env or {})}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.started.append(p)
        return p

    def stop_all(self):
        """Ends what a test started and left running (a failed test leaves its
        `gpuslice run`s waiting for files that will never appear)."""
        for p in self.started:
            if p.poll() is None:
                p.terminate()
        for p in self.started:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)

    def app(self, run_args, app_args, lookup="dlsym", env=None, app=CUDA_APP):
        """`gpuslice run RUN_ARGS -- cuda_app --lookup=LOOKUP APP_ARGS`; returns the result."""
        return self.gpuslice("run", *run_args, "--", app, f"--lookup={lookup}", *app_args, env=env)

    def wait_for_file(self, path, timeout=10.0):
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} never appeared")
            time.sleep(0.005)
        with open(path) as f:
            return f.read().strip()


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    yield w
    w.stop_all()


def lines(result, command):
    """The output lines cuda_app printed for COMMAND, split into words."""
    return [l.split() for l in result.stdout.splitlines() if l.split()[:1] == [command]]


def value(result, command, index=1):
    found = lines(result, command)
    assert found, f"no '{command}' line in output:\n{result.stdout}\n{result.stderr}"
    return int(found[-1][index])
