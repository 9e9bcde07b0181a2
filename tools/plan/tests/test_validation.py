"""The recorded matrix results parse, calibrate only from alone/stock cells,
and the predicted-against-measured table in docs/benchmarks.md regenerates."""
import copy
import os

import pytest

from gpuplan import matrix as mx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BEGIN, END = "<!-- plan:table:begin -->", "<!-- plan:table:end -->"


def results(name):
    return mx.load(os.path.join(ROOT, mx.MATRIX_DIR, name))


@pytest.mark.parametrize("name", [r[0] for r in mx.RUNS])
def test_every_results_file_parses_and_calibrates(name):
    d = results(name)
    gp = mx.gpu_params(d)
    assert 50 < gp.load_us < 400 and gp.preempt_us == mx.PREEMPT_US
    lcs = mx.lc_models(d)
    assert set(lcs) == {"tiny", "graph", "eager"}
    bes = mx.be_models(d, gp)
    for kind, m in bes.items():
        # scaled to its measured alone throughput
        alone = d["cells"]["be_alone_" + kind]["steps_per_s"]
        assert mx.alone_rate(m, gp) == pytest.approx(alone, rel=0.03)


def test_calibration_never_reads_a_gpuslice_cell():
    d = results("results-2026-11-23-h100-run2.json")
    poisoned = copy.deepcopy(d)
    for key, cell in poisoned["cells"].items():
        if key.endswith("_gpuslice") or key.startswith("cap30_"):
            poisoned["cells"][key] = {"poisoned": True}
    gp, gq = mx.gpu_params(d), mx.gpu_params(poisoned)
    assert gp == gq
    assert mx.lc_models(d) == mx.lc_models(poisoned)
    a, b = mx.be_models(d, gp), mx.be_models(poisoned, gq)
    assert {k: (m.kernels, m.gap_us, m.tail_us) for k, m in a.items()} == \
        {k: (m.kernels, m.gap_us, m.tail_us) for k, m in b.items()}


def test_bad_results_file_is_named(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"rows": []}')
    with pytest.raises(ValueError, match="not a workload-matrix result"):
        mx.load(str(p))


def test_every_measured_gpuslice_cell_is_predicted():
    rows = mx.predict(results("results-2026-11-23-h100-run2.json"), "r2", mx.RUNS[1][2])
    cells = {(r.cell, r.figure) for r in rows if r.setting == "gpuslice"}
    # 9 LC x BE cells x 3 figures, 4 mixes (2+2+2+3 tenants + 4 totals), 3 caps
    assert len(cells) == 27 + 13 + 3


def test_error_table_in_docs_regenerates():
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        doc = f.read()
    assert BEGIN in doc and END in doc, "docs/benchmarks.md lost its plan table markers"
    recorded = doc.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    regenerated = mx.markdown(mx.all_rows(ROOT)).strip()
    assert recorded == regenerated, (
        "docs/benchmarks.md's predicted-against-measured table is stale: regenerate it with "
        "tools/plan/plan.py validate --markdown and paste it between the plan:table markers")


def test_no_calibrated_be_beats_its_alone_throughput():
    d = results("results-2026-11-23-h100-run2.json")
    gp = mx.gpu_params(d)
    lcs, bes = mx.lc_models(d), mx.be_models(d, gp)
    for kind, m in bes.items():
        alone = mx.alone_rate(m, gp, seconds=3.0)
        for policy in (mx.sc.STOCK, mx.sc.GPUSLICE):
            out = mx.sc.simulate([mx.sc.Tenant("lc", lcs["graph"], lc=True), mx.sc.Tenant("be", m)], policy, gp,
                                 seconds=3.0)
            assert out.steps_per_s["be"] <= alone * 1.01, (kind, policy.name)
            assert out.p("lc", 50) >= lcs["graph"].alone.at(0.5) * 0.97  # in the model a BE never speeds an LC up (docs/plan.md, limits)


def test_scheduler_alone_matches_gpu_facts_slice_table():
    gp = mx.gpu_params(results("results-2026-11-23-h100-run2.json"))
    rows = mx.gpu_facts_rows(gp, seconds=4.0)
    for r in rows:
        if r.figure == "LC p99":
            assert abs(r.error) < 10, (r.cell, r.measured, r.predicted)
        if r.figure == "LC p50" and r.cell in ("BE slice 10 µs", "BE slice 50 µs", "BE slice 200 µs"):
            assert abs(r.error) < 15, (r.cell, r.measured, r.predicted)
