"""A latency-critical training with a cap beside a best-effort one: is the
LC held to its cap, and does the BE get the rest? (An uncapped LC keeps the
GPU for as long as it has work: the BE beside it gets the LC's gaps only.)

Two copies of one BE kind of run_matrix.py (KIND: gpu), run together for
CAP_S (10) s each way, after the kind alone:
  stock     neither in a vGPU
  uncapped  one in a vGPU with --priority lc, the other --priority be
  capped    the same, the LC with --compute-cap CAP_PCT (30)
Each one's steps/s over the common window, and its fraction of alone.
FIRST=be: the first one is best-effort too (a capped BE beside a BE; the
stock and uncapped runs are skipped), for the cap beside a neighbour.

    bash bench/gpu/with_bundle.sh env OUT=/tmp/out python3 bench/gpu/matrix/lc_cap_beside.py

Writes $OUT/lc_cap_beside.json. FAKE=1 runs it against run_matrix.py's
stand-ins.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_matrix as rm  # noqa: E402

KIND = os.environ.get("KIND", "gpu")
FIRST = os.environ.get("FIRST", "lc")  # the capped one's --priority
TAGS = ("lc", "be") if FIRST == "lc" else ("capped", "be")


def pair(label, lc_vgpu, be_vgpu):
    r, t = rm.run_cell(label, [rm.Load(TAGS[0], rm.cmd_be(KIND), "bg", lc_vgpu),
                               rm.Load(TAGS[1], rm.cmd_be(KIND), "bg", be_vgpu)], 3 * rm.est_cap() + 60,
                       hold_s=rm.CAP_S)
    rm.check(r, *TAGS)
    rates = {}
    for tag in TAGS:
        rate, err = rm.window_rate(r[tag]["step_ends"], t["t_go"], t["t_stop"])
        if rate is None:
            raise RuntimeError(f"{label} {tag}: {err}")
        rates[tag] = round(rate, 4)
    return rates


def main():
    rm.OUT.mkdir(parents=True, exist_ok=True)
    alone = rm.s_be_alone(KIND)("alone")["steps_per_s"]
    result = {"kind": KIND, "cap_pct": rm.CAP_PCT, "alone_steps_per_s": alone}
    cap = ("--compute-cap", str(rm.CAP_PCT))
    runs = [("stock", None, None),
            ("uncapped", ("lccap-uncapped-lc", "--priority", "lc"), ("lccap-uncapped-be", "--priority", "be"))
            ] if FIRST == "lc" else []
    runs.append(("capped", ("lccap-capped-first", "--priority", FIRST, *cap), ("lccap-capped-be", "--priority", "be")))
    result["first_priority"] = FIRST
    for name, lc_vgpu, be_vgpu in runs:
        rates = pair(f"lccap-{name}", lc_vgpu, be_vgpu)
        result[name] = {"steps_per_s": rates, "pct_of_alone": {k: round(100 * v / alone, 1) for k, v in rates.items()}}
        print(name, json.dumps(result[name]), flush=True)
    result["alone_end_steps_per_s"] = rm.s_be_alone(KIND)("alone_end")["steps_per_s"]
    (rm.OUT / "lc_cap_beside.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
