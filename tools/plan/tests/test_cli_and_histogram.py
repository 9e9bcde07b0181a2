"""plan.py's command line, and reading a measured histogram from /metrics."""
import json
import os
import subprocess
import sys

import pytest

from gpuplan.histogram import buckets_from_exposition, quantiles_from_buckets

PLAN = os.path.join(os.path.dirname(__file__), "..", "plan.py")

EXPOSITION = """# HELP gpuslice_vgpu_lc_latency_seconds latency
# TYPE gpuslice_vgpu_lc_latency_seconds histogram
gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="lc",le="0.00025"} 0
gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="lc",le="0.0003"} 50
gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="lc",le="0.0005"} 99
gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="lc",le="0.00075"} 100
gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="lc",le="+Inf"} 100
gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="be",le="+Inf"} 7
gpuslice_vgpu_lc_latency_seconds_sum{vgpu="lc"} 0.031
"""


def plan(*args):
    return subprocess.run([sys.executable, PLAN, *args], capture_output=True, text=True, timeout=300)


def test_histogram_quantiles_as_prometheus_reads_them():
    q = quantiles_from_buckets(buckets_from_exposition(EXPOSITION, "lc"))
    assert q.at(0.5) == pytest.approx(300.0)
    assert q.at(0.25) == pytest.approx(275.0)  # uniform within (250, 300]
    assert q.at(0.99) == pytest.approx(500.0)
    assert q.at(1.0) == pytest.approx(750.0)


def test_histogram_of_another_vgpu_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="no gpuslice_vgpu_lc_latency_seconds_bucket samples"):
        quantiles_from_buckets(buckets_from_exposition(EXPOSITION, "missing"))
    with pytest.raises(ValueError, match="recorded no request"):
        quantiles_from_buckets({0.001: 0.0, float("inf"): 0.0})


def test_predict_prints_json():
    r = plan("predict", "--lc", "tiny", "--be", "gpu", "--seconds", "1", "--json", "--slo-p99-us", "1000")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert 150 < out["lc"]["p50_us"] < 500 and out["lc"]["meets_slo"] is True
    assert 0 < out["be"]["be0-gpu"]["fraction_of_alone"] <= 1.0


def test_predict_reads_a_metrics_page(tmp_path):
    page = tmp_path / "metrics.txt"
    page.write_text(EXPOSITION)
    r = plan("predict", "--lc", "prom:%s:lc" % page, "--lc-gpu-us", "250", "--seconds", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["lc"]["p50_us"] == pytest.approx(300.0, rel=0.05)  # alone: its own histogram


@pytest.mark.parametrize("args, message", [
    (["--lc", "bogus"], "use one of"),
    (["--lc", "hist:1,2"], "four latencies"),
    (["--lc", "hist:280,300,420,600"], "needs --lc-gpu-us"),
    (["--be", "gpu:150"], "share must be 1..100"),
    (["--be", "vision"], "kind must be one of"),
    (["--lc", "tiny", "--lc-rate", "0"], "--lc-rate must be > 0"),
    ([], "nothing to simulate"),
])
def test_bad_input_names_the_problem(args, message):
    r = plan("predict", "--seconds", "0.5", *args)
    assert r.returncode == 2
    assert message in r.stderr


def test_sweep_rows_for_each_policy_and_rate():
    r = plan("sweep", "--lc", "tiny", "--rates", "50,200", "--seconds", "1")
    assert r.returncode == 0, r.stderr
    rows = [line.split("|")[1:-1] for line in r.stdout.splitlines()[2:]]
    assert [(c[0].strip(), c[1].strip()) for c in rows] == [
        ("stock", "50"), ("stock", "200"), ("gpuslice", "50"), ("gpuslice", "200")]
    p99 = {(c[0].strip(), c[1].strip()): float(c[3]) for c in rows}
    assert p99[("gpuslice", "200")] < p99[("stock", "200")] / 3
    assert plan("sweep", "--rates", "a,b").returncode == 2
