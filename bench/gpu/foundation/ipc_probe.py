#!/usr/bin/env python3
"""What happens to device memory that one process exports and another
imports (CUDA VMM IPC: cuMemExportToShareableHandle with a POSIX file
descriptor, cuMemImportFromShareableHandle), as the exporter releases its
handle and exits: what the driver reports (nvidia-smi: the device's used
memory, and each process's), and under gpuslice what the vGPU is charged
(`gpuslice ls --json`) and whether the memory audit acts.

Why (docs/design.md, "Known limits"): the library charges an allocation to
the process that made it and uncharges it at that process's release; an
import is not charged, since its owner pays. But an import keeps the memory
alive after the owner's release, so a tenant could hold memory no ledger
charges. Charging imports would charge NCCL's IPC buffers twice within one
vGPU; this probe measures whether NVML bills importers (then the memory
audit already catches the escape) before the library is changed.

Cases, each a JSON line with the measurements after every step:
  raw        two processes, no gpuslice: export, import and map, the
             exporter releases, the exporter exits, the importer releases.
  vgpu       the same two processes in one vGPU (--memory LIMIT, standalone
             `gpuslice run`, whose supervisor audits its own command): once
             the exporter has released, it allocates SIZE again, which the
             library allows if the import is uncharged.
  self       one process in a vGPU imports its own export, releases the
             original, and allocates SIZE again.
  late       two processes, no gpuslice: the exporter exports and releases
             before anyone imports; the descriptor alone keeps the memory?
             Then the importer imports and maps it.
  orphan     one process in a vGPU exports (the orchestrator keeps the
             descriptor), releases and exits; then the descriptor is closed.
             Under with_daemon.sh, the daemon's log says whether its memory
             audit reported the memory that no process holds.
  legacy     two processes in one vGPU, legacy IPC (cuMemAlloc,
             cuIpcGetMemHandle, cuIpcOpenMemHandle): the exporter frees,
             allocates SIZE again, exits; the importer closes.

    python3 bench/gpu/foundation/ipc_probe.py            (every case)
    CASES=raw SIZE_MIB=1024 python3 bench/gpu/foundation/ipc_probe.py
Under a bundle: bash bench/gpu/with_bundle.sh python3 bench/gpu/foundation/ipc_probe.py
"""

import ctypes
import json
import os
import shlex
import socket
import subprocess
import sys
import time

SIZE = int(os.environ.get("SIZE_MIB", "1024")) * 1024 * 1024
LIMIT_MIB = int(os.environ.get("LIMIT_MIB", str(SIZE * 3 // 2 // (1024 * 1024))))
GPU = os.environ.get("BENCH_GPU", "0")
SETTLE_S = float(os.environ.get("SETTLE_S", "2.5"))  # past the memory audit's 1 s grace and its pass

# --- the driver, through ctypes (in the children) ---------------------------


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


class IpcHandle(ctypes.Structure):  # CUipcMemHandle
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


PINNED, POSIX_FD, ON_DEVICE, READ_WRITE = 1, 1, 1, 3


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.call("cuInit", 0)
        dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(dev), 0)
        ctx = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self.call("cuCtxSetCurrent", ctx)
        self.prop = AllocationProp(PINNED, POSIX_FD, Location(ON_DEVICE, 0), None, AllocFlags())
        gran = ctypes.c_size_t()
        self.call("cuMemGetAllocationGranularity", ctypes.byref(gran), ctypes.byref(self.prop), 0)
        self.size = (SIZE + gran.value - 1) // gran.value * gran.value

    def call(self, name, *args):
        r = getattr(self.cu, name)(*args)
        if r != 0:
            raise RuntimeError(f"{name}: CUresult {r}")

    def create(self):
        h = ctypes.c_ulonglong()
        self.call("cuMemCreate", ctypes.byref(h), ctypes.c_size_t(self.size), ctypes.byref(self.prop),
                  ctypes.c_ulonglong(0))
        return h.value

    def export(self, handle):
        fd = ctypes.c_int(-1)
        self.call("cuMemExportToShareableHandle", ctypes.byref(fd), ctypes.c_ulonglong(handle), POSIX_FD,
                  ctypes.c_ulonglong(0))
        return fd.value

    def import_fd(self, fd):
        h = ctypes.c_ulonglong()
        self.call("cuMemImportFromShareableHandle", ctypes.byref(h), ctypes.c_void_p(fd), POSIX_FD)
        return h.value

    def map(self, handle):
        ptr = ctypes.c_ulonglong()
        self.call("cuMemAddressReserve", ctypes.byref(ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(0),
                  ctypes.c_ulonglong(0), ctypes.c_ulonglong(0))
        self.call("cuMemMap", ctypes.c_ulonglong(ptr.value), ctypes.c_size_t(self.size), ctypes.c_size_t(0),
                  ctypes.c_ulonglong(handle), ctypes.c_ulonglong(0))
        desc = AccessDesc(Location(ON_DEVICE, 0), READ_WRITE)
        self.call("cuMemSetAccess", ctypes.c_ulonglong(ptr.value), ctypes.c_size_t(self.size), ctypes.byref(desc),
                  ctypes.c_size_t(1))
        return ptr.value

    def touch(self, ptr):  # writes every byte: the memory is really there
        self.call("cuMemsetD8_v2", ctypes.c_ulonglong(ptr), ctypes.c_ubyte(7), ctypes.c_size_t(self.size))
        self.call("cuCtxSynchronize")

    def unmap(self, ptr):
        self.call("cuMemUnmap", ctypes.c_ulonglong(ptr), ctypes.c_size_t(self.size))
        self.call("cuMemAddressFree", ctypes.c_ulonglong(ptr), ctypes.c_size_t(self.size))

    def release(self, handle):
        self.call("cuMemRelease", ctypes.c_ulonglong(handle))

    # Legacy IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle), which PyTorch's
    # CUDA tensors use between processes: a 64-byte handle, sent as hex.
    def alloc(self):
        ptr = ctypes.c_ulonglong()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(self.size))
        self.touch(ptr.value)
        return ptr.value

    def free(self, ptr):
        self.call("cuMemFree_v2", ctypes.c_ulonglong(ptr))

    def ipc_get(self, ptr):
        handle = IpcHandle()
        self.call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_ulonglong(ptr))
        return bytes(handle.reserved).hex()

    def ipc_open(self, hex_handle):
        handle = IpcHandle.from_buffer_copy(bytes.fromhex(hex_handle))  # passed by value: a Structure
        ptr = ctypes.c_ulonglong()
        self.call("cuIpcOpenMemHandle_v2", ctypes.byref(ptr), handle, ctypes.c_uint(1))
        self.touch(ptr.value)
        return ptr.value

    def ipc_close(self, ptr):
        self.call("cuIpcCloseMemHandle", ctypes.c_ulonglong(ptr))


def serve(sock):
    """A child: runs the orchestrator's commands, one message each (a
    SOCK_SEQPACKET pair keeps messages and their file descriptors together);
    answers `ok` or `error why`, and an export with the descriptor."""
    drv = None
    handles, ptrs = {}, {}
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 4096, 4)
        if not msg:
            return
        cmd, *args = msg.decode().split()
        reply_fds = []
        try:
            if drv is None:
                drv = Driver()
            if cmd == "create":
                handles[args[0]] = drv.create()
            elif cmd == "export":
                reply_fds = [drv.export(handles[args[0]])]
            elif cmd == "import":  # the descriptor came with the command
                handles[args[0]] = drv.import_fd(fds[0])
            elif cmd == "export_import":  # our own export, imported back
                fd = drv.export(handles[args[0]])
                handles[args[1]] = drv.import_fd(fd)
                os.close(fd)
            elif cmd == "map":
                ptrs[args[0]] = drv.map(handles[args[0]])
                drv.touch(ptrs[args[0]])
            elif cmd == "unmap":
                drv.unmap(ptrs.pop(args[0]))
            elif cmd == "release":
                drv.release(handles.pop(args[0]))
            elif cmd == "alloc":
                ptrs[args[0]] = drv.alloc()
            elif cmd == "free":
                drv.free(ptrs.pop(args[0]))
            elif cmd == "ipc_get":  # answers "ok HEX"
                socket.send_fds(sock, [f"ok {drv.ipc_get(ptrs[args[0]])}".encode()], [])
                continue
            elif cmd == "ipc_open":
                ptrs[args[0]] = drv.ipc_open(args[1])
            elif cmd == "ipc_close":
                drv.ipc_close(ptrs.pop(args[0]))
            elif cmd == "exit":
                sock.send(b"ok")
                return
            else:
                raise ValueError(f"unknown command {cmd}")
            out = "ok"
        except Exception as e:  # noqa: BLE001 - the orchestrator records it
            out = f"error {type(e).__name__}: {e}"
        socket.send_fds(sock, [out.encode()], reply_fds)
        for fd in [*fds, *reply_fds]:
            os.close(fd)


# --- the orchestrator (no CUDA) ----------------------------------------------


def smi(*args):
    out = subprocess.run(["nvidia-smi", "-i", GPU, *args, "--format=csv,noheader,nounits"], capture_output=True,
                         text=True, timeout=60).stdout
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]


def gpuslice_cmd():
    if os.environ.get("GPUSLICE_CMD"):
        return shlex.split(os.environ["GPUSLICE_CMD"])
    return [os.environ.get("GPUSLICE_BIN", "build/bin/gpuslice")]


class Child:
    def __init__(self, name, vgpu, env):
        self.name = name
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = [sys.executable, os.path.abspath(__file__), "--serve", str(theirs.fileno())]
        if vgpu:
            cmd = [*gpuslice_cmd(), "run", "--name", vgpu, "--memory", f"{LIMIT_MIB}MiB", "--gpu", GPU, "--", *cmd]
        self.log = open(os.path.join(env["PROBE_DIR"], f"{name}.log"), "w")
        self.proc = subprocess.Popen(cmd, pass_fds=[theirs.fileno()], env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        theirs.close()
        self.sock = ours
        self.sock.settimeout(120)

    def send(self, line, fds=()):
        """One command; returns (answer, descriptors that came with it)."""
        try:
            socket.send_fds(self.sock, [line.encode()], list(fds))
            msg, got, _, _ = socket.recv_fds(self.sock, 4096, 4)
        except OSError as e:
            return f"error {type(e).__name__}: {e} (exit {self.proc.poll()})", []
        return (msg.decode() or f"error no answer (exit {self.proc.poll()})"), got

    def do(self, line):
        return self.send(line)[0]

    def export_to(self, other, handle, into):
        answer, fds = self.send(f"export {handle}")
        if not fds:
            return answer
        try:
            return other.send(f"import {into}", fds)[0]
        finally:
            for fd in fds:
                os.close(fd)

    def pid(self):
        """The pid of the Python process itself (under gpuslice, the run's child)."""
        if self.proc.poll() is not None:
            return None
        kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        return int(kids[0]) if kids else self.proc.pid

    def exit(self):
        if self.proc.poll() is None:
            self.do("exit")
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode


def measure(children, vgpu, env):
    apps = {}
    for row in smi("--query-compute-apps=pid,used_memory"):
        try:
            apps[int(row[0])] = row[1]
        except ValueError:
            pass
    m = {"device_used_mib": int(smi("--query-gpu=memory.used")[0][0]),
         "procs": {c.name: {"alive": c.proc.poll() is None, "exit": c.proc.poll(),
                            "smi_used_mib": apps.get(c.pid())} for c in children}}
    if vgpu:
        r = subprocess.run([*gpuslice_cmd(), "ls", "--json", vgpu], capture_output=True, text=True, env=env)
        try:
            v = json.loads(r.stdout)["vgpus"][0]
            m["vgpu"] = {"used_mib": v["devices"][0]["memory_used_bytes"] // 2**20,
                         "limit_mib": v["devices"][0]["memory_limit_bytes"] // 2**20,
                         "by_pid_mib": {p["pid"]: p["memory_used_bytes"][0] // 2**20 for p in v["processes"]}}
        except (ValueError, KeyError, IndexError, TypeError):
            m["vgpu"] = {"error": (r.stderr or r.stdout).strip()[:300]}
    return m


def run_case(case):
    env = dict(os.environ)
    env["PROBE_DIR"] = os.environ.get("PROBE_DIR", f"/tmp/ipc-probe-{os.getpid()}/{case}")
    os.makedirs(env["PROBE_DIR"], exist_ok=True)
    if case not in ("raw", "late"):
        env.setdefault("GPUSLICE_STATE_DIR", f"/tmp/ipc-probe-{os.getpid()}/state")
    vgpu = None if case in ("raw", "late") else f"ipc-{case}"
    steps = []
    kids = []

    def step(what, answer):
        time.sleep(SETTLE_S)
        steps.append({"step": what, "answer": answer, **measure(kids, vgpu, env)})

    base = int(smi("--query-gpu=memory.used")[0][0])
    try:
        if case == "self":
            a = Child("exporter", vgpu, env)
            kids.append(a)
            step("create", a.do("create h1"))
            step("map the original", a.do("map h1"))
            step("export and import its own handle", a.do("export_import h1 h2"))
            step("map the import", a.do("map h2"))
            step("unmap and release the original", f"{a.do('unmap h1')} {a.do('release h1')}")
            step("create again (within the limit only if the import is uncharged)", a.do("create h3"))
            step("map it", a.do("map h3"))
        elif case == "late":
            a = Child("exporter", vgpu, env)
            kids.append(a)
            b = Child("importer", vgpu, env)
            kids.append(b)
            step("exporter creates and maps", f"{a.do('create h1')} {a.do('map h1')}")
            answer, fds = a.send("export h1")
            what = [f"{os.readlink(f'/proc/self/fd/{fd}')} ino={os.fstat(fd).st_ino}" for fd in fds]
            step("exporter exports (the descriptor kept by the orchestrator)", f"{answer} {what}")
            step("exporter unmaps and releases", f"{a.do('unmap h1')} {a.do('release h1')}")
            late = b.send("import i1", fds)[0] if fds else "no descriptor"
            for fd in fds:
                os.close(fd)
            step("importer imports the descriptor and maps", f"{late} {b.do('map i1')}")
            step("importer unmaps and releases", f"{b.do('unmap i1')} {b.do('release i1')}")
        elif case == "orphan":
            a = Child("exporter", vgpu, env)
            kids.append(a)
            step("exporter creates and maps", f"{a.do('create h1')} {a.do('map h1')}")
            answer, fds = a.send("export h1")
            step("exporter exports (the descriptor kept by the orchestrator)", answer)
            step("exporter unmaps and releases", f"{a.do('unmap h1')} {a.do('release h1')}")
            step("exporter exits", str(a.exit()))
            time.sleep(3)  # the daemon's audit: 1 s passes and a 1 s grace
            step("3 s later", "")
            for fd in fds:
                os.close(fd)
            step("the descriptor closed", "")
        elif case == "legacy":
            a = Child("exporter", vgpu, env)
            kids.append(a)
            b = Child("importer", vgpu, env)
            kids.append(b)
            step("exporter allocates", a.do("alloc p1"))
            answer = a.do("ipc_get p1")
            opened = b.do(f"ipc_open q1 {answer.split()[1]}") if answer.startswith("ok ") else answer
            step("importer opens", opened)
            step("exporter frees", a.do("free p1"))
            step("exporter allocates again (within the limit only if the opened memory is uncharged)",
                 a.do("alloc p2"))
            step("exporter exits", str(a.exit()))
            step("importer closes", b.do("ipc_close q1"))
        else:
            a = Child("exporter", vgpu, env)
            kids.append(a)
            b = Child("importer", vgpu, env)
            kids.append(b)
            step("exporter creates and maps", f"{a.do('create h1')} {a.do('map h1')}")
            step("importer imports and maps", f"{a.export_to(b, 'h1', 'i1')} {b.do('map i1')}")
            step("exporter unmaps and releases", f"{a.do('unmap h1')} {a.do('release h1')}")
            if case == "vgpu":
                step("exporter creates again (within the limit only if the import is uncharged)",
                     f"{a.do('create h2')} {a.do('map h2')}")
            step("exporter exits", str(a.exit()))
            step("importer unmaps and releases", f"{b.do('unmap i1')} {b.do('release i1')}")
    finally:
        codes = {c.name: c.exit() for c in kids}
    return {"case": case, "size_bytes": SIZE, "limit_mib": LIMIT_MIB if vgpu else None, "baseline_used_mib": base,
            "steps": steps, "exit_codes": codes}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(socket.socket(fileno=int(sys.argv[2])))
        return
    for case in os.environ.get("CASES", "raw,late,vgpu,self,legacy").split(","):
        print(json.dumps(run_case(case)), flush=True)


if __name__ == "__main__":
    main()
