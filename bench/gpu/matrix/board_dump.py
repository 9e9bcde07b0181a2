#!/usr/bin/env python3
"""Prints every pacing board under STATE/boards every INTERVAL seconds (0.5)
until killed:
the turn word and each live member's row (src/core/pacing_board.h, board
version 3). For diagnosing turns on a GPU machine:
    python3 bench/gpu/matrix/board_dump.py /tmp/gpuslice-state [INTERVAL] > boards.log &"""
import glob
import os
import struct
import sys
import time

MEMBER = struct.Struct("<QQIIIiQQQQQqQQQQI")
FIELDS = ("vgpu_id", "heartbeat_ns", "weight", "cap_pct", "priority", "busy", "demand_ns", "last_launch_ns",
          "drained_ns", "vtime", "charged", "cap_tokens_ns", "cap_stamp_ns", "turns", "hold_until_ns",
          "lc_burst_start_ns", "lc_linger_us")


def dump(path):
    now = time.monotonic_ns()
    with open(path, "rb") as f:
        data = f.read(128 + 64 * 128)
    turn, = struct.unpack_from("<Q", data, 16)
    holder = (turn & 0x7f) - 1
    rows = []
    for i in range(64):
        m = dict(zip(FIELDS, MEMBER.unpack_from(data, 128 + 128 * i)))
        if m["vgpu_id"] == 0:
            continue
        age = lambda ns: f"{(now - ns) / 1e6:.1f}ms" if ns else "-"  # noqa: E731
        rows.append(f"  m{i}{'*' if i == holder else ' '} w{m['weight']} cap{m['cap_pct']} prio{m['priority']} "
                    f"beat {age(m['heartbeat_ns'])} busy {m['busy']} demand {age(m['demand_ns'])} "
                    f"launch {age(m['last_launch_ns'])} drained {age(m['drained_ns'])} vtime {m['vtime'] / 1e6:.1f}ms "
                    f"charged {m['charged'] / 1e6:.1f}ms turns {m['turns']}")
    print(f"{now} {os.path.basename(path)} holder m{holder} seq {(turn >> 8) & 0xffff}{' closing' if turn >> 7 & 1 else ''}")
    print("\n".join(rows), flush=True)


def main():
    state = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    while True:
        for path in glob.glob(os.path.join(state, "boards", "gpu-*")):
            try:
                dump(path)
            except OSError:
                pass
        time.sleep(interval)


if __name__ == "__main__":
    main()
