"""A hostile process of a vGPU (issue 11, "SIGBUS by truncation"): it tries
to resize every file and descriptor it can reach that holds its vGPU's
ledger or a pacing board, and prints what each attempt gave as JSON:
{"attempts": [[what, result], ...]}, where result is "truncated" or the
errno name of the refusal.

Reached are: `ledger` and `boards/*` in $GPUSLICE_VGPU_DIR (the files of
a vGPU made before issue 11), the descriptors its state socket hands any
process of the vGPU, the same memory reopened through /proc/self/fd, and
its mappings through /proc/self/map_files."""
import errno
import json
import mmap
import os
import socket
import sys

attempts = []


def attempt(what, fn):
    try:
        fn()
        attempts.append([what, "truncated"])
    except OSError as e:
        attempts.append([what, errno.errorcode.get(e.errno, str(e.errno))])


def shrink_and_grow_fd(what, fd):
    attempt(what + " shrink", lambda: os.ftruncate(fd, 0))
    attempt(what + " grow", lambda: os.ftruncate(fd, 1 << 30))


def main():
    vgpu = os.environ["GPUSLICE_VGPU_DIR"]
    files = [os.path.join(vgpu, "ledger")]
    boards = os.path.join(vgpu, "boards")
    if os.path.isdir(boards):
        files += [os.path.join(boards, f) for f in sorted(os.listdir(boards))]
    for path in files:
        if os.path.lexists(path):
            attempt("file " + os.path.relpath(path, vgpu), lambda: os.truncate(path, 0))

    sock = os.path.join(vgpu, "state.sock")
    maps = []
    if os.path.exists(sock):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(sock)
            text, fds, _, _ = socket.recv_fds(s, 4096, 64)
        names = [line for line in text.decode().splitlines()[1:]]
        for name, fd in zip(names, fds):
            maps.append(mmap.mmap(fd, os.fstat(fd).st_size))  # as the library maps it
            shrink_and_grow_fd("handed " + name, fd)
            reopened = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
            shrink_and_grow_fd("reopened " + name, reopened)
            os.close(reopened)
            os.close(fd)
        with open("/proc/self/maps") as f:
            regions = [line.split()[0] for line in f if "memfd:gpuslice" in line]
        for r in regions:
            def via_map_files(r=r):
                fd = os.open(f"/proc/self/map_files/{r}", os.O_RDWR)
                try:
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
            attempt("map_files " + r, via_map_files)
    print(json.dumps({"attempts": attempts}))
    sys.stdout.flush()


main()
