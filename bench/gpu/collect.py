#!/usr/bin/env python3
"""Collects the checks' results for run_all.sh (standard library only).

  collect.py add JSONL ID EXIT_CODE SECONDS RESULT_FILE LOG LOG_OFFSET
      appends the check's result, or a failure record carrying the end of its
      log when it left none (crash, timeout)
  collect.py skip JSONL ID REASON
  collect.py assemble JSONL OUT_JSON    writes the suite's one JSON document
  collect.py summary JSONL              prints a table of the verdicts
"""

import datetime
import json
import os
import sys
from pathlib import Path

TAIL_LINES = 40


def read(jsonl):
    path = Path(jsonl)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def append(jsonl, record):
    with open(jsonl, "a") as f:
        f.write(json.dumps(record) + "\n")


def add(jsonl, check_id, code, seconds, result_file, log, log_offset):
    code, seconds = int(code), float(seconds)
    try:
        record = json.loads(Path(result_file).read_text())
    except (OSError, ValueError):
        with open(log, "rb") as f:
            f.seek(int(log_offset))
            tail = f.read().decode(errors="replace").splitlines()[-TAIL_LINES:]
        timed_out = code in (124, 137)  # timeout's TERM, then its KILL
        why = f"timed out after {seconds:.0f}s" if timed_out else f"exit {code} without a result"
        record = {"check": check_id, "ok": False, "error": why, "log_tail": tail}
    record.update(exit_code=code, seconds=round(seconds, 1))
    append(jsonl, record)


def skip(jsonl, check_id, reason):
    append(jsonl, {"check": check_id, "ok": False, "skipped": True, "error": reason})


def assemble(jsonl, out):
    records = read(jsonl)
    env = next((r for r in records if r["check"] == "env"), None)
    now = datetime.datetime.now(datetime.timezone.utc)
    doc = {"suite": "foundation", "generated_utc": now.isoformat(timespec="seconds"),
           "all_ok": bool(records) and all(r["ok"] for r in records),
           "passed": [r["check"] for r in records if r["ok"]],
           "failed": [r["check"] for r in records if not r["ok"]],
           "env": env, "checks": records}
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, out)


# The one figure that best summarises each check, for the table.
HEADLINE = {
    "context": lambda r: f"context {r.get('context_mib', 0):.0f} MiB",
    "mem_get_info": lambda r: f"total {r['child']['before'][1] / 2**30:.2f} GiB, "
                              f"nvml {r['nvml']['total_mib']}/{r['nvml']['used_mib']} MiB",
    "oom": lambda r: f"alloc {r['allocated_mib']:.0f} MiB, "
                     f"real-ctx {r['real_minus_context_mib']:.0f} MiB",
    "train_small": lambda r: f"{r['child']['steps']} steps, "
                             f"{r['child']['median_step_ms']:.2f} ms/step",
    "train_overhead": lambda r: f"with/without {r['overhead_pct']:+.2f}% "
                                f"(noise: without/without {r['noise_pct']:+.2f}%), {r['rounds']} rounds",
    "launch_overhead": lambda r: f"launch +{r['launch']['added_ns']:.1f} ns "
                                 f"(noise {r['launch']['noise_ns']:.1f}), "
                                 f"alloc+free +{r['alloc_free']['added_ns']:.0f} ns",
    "env": lambda r: f"{r['gpu']['name']}, driver {r['gpu']['driver_version']}, torch {r['torch']}",
}


OOM_CHECKS = ("oom_torch", "oom_torch_expandable", "shared_vgpu", "oom_cupy")


def headline(record):
    base = record["check"].split(".")[0]
    key = "oom" if base in OOM_CHECKS else base
    try:
        return HEADLINE[key](record) if key in HEADLINE else ""
    except (KeyError, TypeError, IndexError, ZeroDivisionError):
        return ""  # a failed check has no figures; summary() prints its error


def summary(jsonl):
    for r in read(jsonl):
        verdict = "PASS" if r["ok"] else ("SKIP" if r.get("skipped") else "FAIL")
        failed = [k for k, v in (r.get("asserts") or {}).items() if not v]
        note = f"  failed: {', '.join(failed)}" if failed else ""
        if not r["ok"] and "error" in r:
            note += f"  error: {r['error'][:120]}"
        print(f"{verdict}  {r['check']:<28} {r.get('seconds', 0):6.1f}s  {headline(r)}{note}")


def main(argv):
    commands = {"add": add, "skip": skip, "assemble": assemble, "summary": summary}
    if len(argv) < 2 or argv[1] not in commands:
        sys.exit(__doc__)
    commands[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
