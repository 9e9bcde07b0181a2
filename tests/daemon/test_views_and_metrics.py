"""What operators see: `gpuslice devices`, `ls`, `top`, the measured compute
share, and the daemon's Prometheus metrics, scraped by a real Prometheus."""
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from conftest import GPUSLICE, MiB, poll, scrape

NVLINK = {"FAKE_GPU_COUNT": "2", "FAKE_GPU_NVLINK": "1"}


def devices_json(dworld, env=None):
    r = dworld.gpuslice("devices", "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_devices_json_has_exactly_the_documented_shape(dworld):
    standalone = devices_json(dworld, NVLINK)
    dworld.env.update(NVLINK)
    dworld.daemon()
    via_daemon = devices_json(dworld)
    assert via_daemon == standalone
    d = via_daemon
    assert list(d) == ["node", "driver_version", "gpus", "links"]
    assert d["node"] == socket.gethostname()
    assert d["driver_version"] == "580.00-fake"
    assert d["gpus"] == [
        {"index": i, "uuid": f"GPU-face0000-0000-0000-0000-00000000000{i}", "name": "Fake H100",
         "memory_total_bytes": 1024 * MiB, "pci_bus_id": f"00000000:0{i}:00.0",
         "healthy": True, "health_detail": "", "last_xid": None, "xid_errors": []} for i in range(2)]
    assert d["links"] == [{"a": 0, "b": 1, "type": "nvlink", "nvlinks": 18}]


def test_devices_without_nvlink_report_the_pcie_level(dworld):
    d = devices_json(dworld, {"FAKE_GPU_COUNT": "3"})
    assert [(l["a"], l["b"], l["type"], l["nvlinks"]) for l in d["links"]] == [
        (0, 1, "system", 0), (0, 2, "system", 0), (1, 2, "system", 0)]
    table = dworld.gpuslice("devices", env={"FAKE_GPU_COUNT": "3", "FAKE_GPU_NVLINK": "1"}).stdout
    assert re.search(r"GPU0\s+X\s+NV9\s+NV9", table), table


def test_ls_and_top_show_limits_usage_and_processes(dworld):
    dworld.daemon()
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "view", "--memory", "64MiB", "--compute", "40", "--", *dworld.app_cmd(
        ["init", "alloc", "24M", "ready", ready, "await", go]))
    pid = int(dworld.wait_for_file(ready))
    table = dworld.gpuslice("ls").stdout
    assert re.search(rf"view\s+be\s+0\s+24 MiB\s+64 MiB\s+40%\s+\S+\s+\S+\s+1\s+{pid}", table), table
    top = dworld.gpuslice("top", "--once")
    assert top.returncode == 0, top.stderr
    assert "GPU 0  Fake H100" in top.stdout
    assert re.search(r"view\s+be\s+24 MiB / 64 MiB \(37%\)\s+40%", top.stdout), top.stdout
    frames = dworld.gpuslice("top", "--iterations", "2", "--interval-ms", "50", "--json")
    assert frames.returncode == 0, frames.stderr
    parsed = [json.loads(l) for l in frames.stdout.splitlines()]
    assert len(parsed) == 2
    assert parsed[1]["vgpus"][0]["processes"][0]["pid"] == pid
    assert parsed[0]["daemon_pid"] == dworld.daemons[0].proc.pid
    # Without a daemon, ls reads the state directory itself.
    dworld.daemons[0].stop()
    alone = dworld.ls("view")["view"]
    assert alone["devices"][0]["memory_used_bytes"] == 24 * MiB
    assert alone["devices"][0]["compute_measured_ratio"] is None
    missing = dworld.gpuslice("ls", "nothere")
    assert missing.returncode == 2 and "no vGPU 'nothere'" in missing.stderr
    open(go, "w").close()
    app.communicate(timeout=30)


def test_measured_compute_share_comes_from_nvml_per_process_utilisation(dworld):
    samples = dworld.path("utilisation")
    open(samples, "w").close()
    dworld.daemon(env={"FAKE_NVML_PROCESS_UTILIZATION_FILE": samples})
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "busy", "--", *dworld.app_cmd(["init", "alloc", "1M", "ready", ready,
                                                                       "await", go]))
    pid = int(dworld.wait_for_file(ready))
    with open(samples, "w") as f:
        f.write(f"{pid} 42\n999999 90\n")  # the second pid belongs to no vGPU
    poll(lambda: dworld.ls("busy")["busy"]["devices"][0]["compute_measured_ratio"] == pytest.approx(0.42, rel=0.05),
         5, "measured share")
    open(go, "w").close()
    app.communicate(timeout=30)


def test_metrics_are_served_on_loopback_from_the_vgpus_state(dworld):
    d = dworld.daemon()
    assert d.metrics_port
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "met", "--memory", "64MiB", "--", *dworld.app_cmd(
        ["init", "alloc", "40M", "alloc", "40M", "ready", ready, "await", go]))
    dworld.wait_for_file(ready)
    text = scrape(d.metrics_port)
    assert 'gpuslice_vgpu_memory_used_bytes{gpu="0",vgpu="met"} 41943040' in text
    assert 'gpuslice_vgpu_memory_limit_bytes{gpu="0",vgpu="met"} 67108864' in text
    assert 'gpuslice_vgpu_allocation_denials_total{vgpu="met"} 1' in text
    assert 'gpuslice_vgpu_compute_share_target_ratio{gpu="0",vgpu="met"} 1' in text
    assert 'gpuslice_vgpu_processes{vgpu="met"} 1' in text
    assert f'gpuslice_gpu_memory_total_bytes{{gpu="0"}} {1024 * MiB}' in text
    assert "gpuslice_daemon_up 1" in text
    assert re.search(r"gpuslice_daemon_start_time_seconds \d{10}", text)
    open(go, "w").close()
    app.communicate(timeout=30)
    poll(lambda: 'vgpu="met"' not in scrape(d.metrics_port), 10, "series of a removed vGPU gone")
    assert "gpuslice_daemon_reaped_processes_total" in scrape(d.metrics_port)


LC_RECORDER = os.path.join(os.path.dirname(GPUSLICE), "lc_latency_recorder")
# gpuslice_vgpu_lc_latency_seconds's bounds (docs/metrics.md), then +Inf.
LC_BOUNDS = [25e-6, 50e-6, 100e-6, 150e-6, 200e-6, 300e-6, 500e-6, 750e-6, 1e-3, 1.5e-3, 2e-3, 3e-3, 5e-3,
             7.5e-3, 10e-3, 20e-3, 50e-3, 100e-3, 250e-3, 1.0, float("inf")]


def record_lc_latency(dworld, name, *batches):
    """Records LC requests in vGPU `name`'s ledger, as the library's spans
    do: each batch is (count, nanoseconds), or a task batch as the recorder
    takes it ("LEVEL[+FLAGS]:COUNTxNS")."""
    r = subprocess.run([LC_RECORDER, dworld.vgpu_dir(name),
                        *(b if isinstance(b, str) else f"{b[0]}x{b[1]}" for b in batches)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def histogram(text, name, vgpu):
    """{le: count} (le as a float), sum and count of one vGPU's series of
    histogram `name`, checked to be a valid Prometheus histogram on the way."""
    buckets, total, count = {}, None, None
    for line in text.splitlines():
        m = re.fullmatch(rf'{name}_bucket\{{vgpu="{vgpu}",le="([^"]+)"\}} (\S+)', line)
        if m:
            buckets[float(m.group(1))] = float(m.group(2))  # Python reads "+Inf" and "1e-04" too
        m = re.fullmatch(rf'{name}_(sum|count)\{{vgpu="{vgpu}"\}} (\S+)', line)
        if m and m.group(1) == "sum":
            total = float(m.group(2))
        elif m:
            count = float(m.group(2))
    assert list(buckets) == LC_BOUNDS, text  # every bound, in order, +Inf last
    values = list(buckets.values())
    assert values == sorted(values), "buckets must be cumulative"
    assert count == buckets[float("inf")], "_count must equal the +Inf bucket"
    return buckets, total, count


def test_lc_latency_is_a_histogram_in_metrics_and_quantiles_in_ls_and_top(dworld):
    d = dworld.daemon()
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "lat", "--priority", "lc", "--", *dworld.app_cmd(
        ["init", "alloc", "1M", "ready", ready, "await", go]))
    dworld.wait_for_file(ready)
    be_ready = dworld.path("be-ready")
    be = dworld.start("run", "--name", "quiet", "--", *dworld.app_cmd(
        ["init", "ready", be_ready, "await", go]))
    dworld.wait_for_file(be_ready)

    # An LC vGPU with no request yet: an empty histogram, no quantiles.
    text = scrape(d.metrics_port)
    buckets, total, count = histogram(text, "gpuslice_vgpu_lc_latency_seconds", "lat")
    assert count == 0 and total == 0
    assert dworld.ls("lat")["lat"]["lc_latency"] == {
        "requests": 0, "sum_seconds": 0, "p50_seconds": None, "p99_seconds": None,
        "window_seconds": None, "window_requests": 0}

    # 990 requests of 80 µs and 10 of 6 ms.
    record_lc_latency(dworld, "lat", (990, 80_000), (10, 6_000_000))
    text = scrape(d.metrics_port)
    buckets, total, count = histogram(text, "gpuslice_vgpu_lc_latency_seconds", "lat")
    assert count == 1000
    assert total == pytest.approx(990 * 80e-6 + 10 * 6e-3)
    assert buckets[50e-6] == 0 and buckets[100e-6] == 990 and buckets[5e-3] == 990
    assert buckets[7.5e-3] == 1000 and buckets[1.0] == 1000
    # A BE vGPU that never recorded has no series.
    assert 'gpuslice_vgpu_lc_latency_seconds_count{vgpu="quiet"}' not in text

    # The daemon's quantiles are over its recent window, which holds all 1000
    # requests (or, had a sample split the batch, over the lifetime once the
    # window has moved past it).
    def whole_batch():
        v = dworld.ls("lat")["lat"]["lc_latency"]
        return v if v["window_seconds"] is None or v["window_requests"] == 1000 else None
    lc = poll(whole_batch, 15, "LC quantiles over the whole batch")
    assert lc["requests"] == 1000
    assert lc["sum_seconds"] == pytest.approx(0.1392)
    assert 50e-6 < lc["p50_seconds"] <= 100e-6
    assert lc["p99_seconds"] == pytest.approx(100e-6)  # the 990th request tops the (50, 100] µs bucket
    assert dworld.ls("quiet")["quiet"]["lc_latency"]["p99_seconds"] is None

    top = dworld.gpuslice("top", "--once")
    assert top.returncode == 0, top.stderr
    assert re.search(r"LC P99\n", top.stdout), top.stdout
    assert re.search(r"\blat\s+lc\s.*\s100us\n", top.stdout), top.stdout
    assert re.search(r"\bquiet\s+be\s.*\s-\n", top.stdout), top.stdout
    frame = json.loads(dworld.gpuslice("top", "--once", "--json").stdout)
    by_name = {v["name"]: v for v in frame["vgpus"]}
    assert by_name["lat"]["lc_latency"]["requests"] == 1000
    assert by_name["lat"]["lc_latency"]["p99_seconds"] == pytest.approx(100e-6)

    # Without the daemon, ls and top read the ledger: lifetime quantiles.
    d.stop()
    alone = dworld.ls("lat")["lat"]["lc_latency"]
    assert alone["window_seconds"] is None and alone["window_requests"] == 0
    assert alone["requests"] == 1000
    assert alone["p50_seconds"] == pytest.approx(50e-6 + 50e-6 * 500 / 990)
    assert alone["p99_seconds"] == pytest.approx(100e-6)
    top = dworld.gpuslice("top", "--once")
    assert re.search(r"\blat\s+lc\s.*\s100us\n", top.stdout), top.stdout
    open(go, "w").close()
    app.communicate(timeout=30)
    be.communicate(timeout=30)


def task_series(text, name, vgpu, level):
    """{le: count} of a task histogram's series, or the value of a counter."""
    labels = f'vgpu="{vgpu}",level="{level}"'
    buckets = {float(m.group(1)): float(m.group(2)) for m in
               re.finditer(rf'^{name}_bucket\{{{labels},le="([^"]+)"\}} (\S+)$', text, re.M)}
    if buckets:
        return buckets
    m = re.search(rf'^{name}\{{{labels}\}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def test_task_levels_of_the_task_api_show_in_metrics_ls_and_top(dworld):
    d = dworld.daemon()
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "svc", "--priority", "lc", "--", *dworld.app_cmd(
        ["init", "ready", ready, "await", go]))
    dworld.wait_for_file(ready)
    assert dworld.ls("svc")["svc"]["task_levels"] == []
    assert 'gpuslice_vgpu_tasks_total{vgpu="svc"' not in scrape(d.metrics_port)

    # As the schedulers of two processes would: "high" tasks of 300 us, one of
    # 9 ms over its SLO; "low" tasks of 40 ms, two of them failed (flags: 1
    # failed, 2 SLO miss).
    record_lc_latency(dworld, "svc", "high:98x300000", "high+2:2x9000000")
    record_lc_latency(dworld, "svc", "low:8x40000000", "low+1:2x40000000")
    text = scrape(d.metrics_port)
    high = task_series(text, "gpuslice_vgpu_task_latency_seconds", "svc", "high")
    assert list(high) == LC_BOUNDS, text
    assert high[200e-6] == 0 and high[300e-6] == 98 and high[7.5e-3] == 98 and high[10e-3] == 100
    assert task_series(text, "gpuslice_vgpu_tasks_total", "svc", "high") == 100
    assert task_series(text, "gpuslice_vgpu_task_slo_misses_total", "svc", "high") == 2
    assert task_series(text, "gpuslice_vgpu_task_failures_total", "svc", "high") == 0
    assert task_series(text, "gpuslice_vgpu_tasks_total", "svc", "low") == 10
    assert task_series(text, "gpuslice_vgpu_task_failures_total", "svc", "low") == 2
    # The LC histogram of spans is apart: no task is a span.
    assert 'gpuslice_vgpu_lc_latency_seconds_count{vgpu="svc"} 0' in text

    def levels():
        got = {t["level"]: t for t in dworld.ls("svc")["svc"]["task_levels"]}
        return got if all(t["latency"]["window_seconds"] is None or t["latency"]["window_requests"] ==
                          t["latency"]["requests"] for t in got.values()) else None
    by_level = poll(levels, 15, "task quantiles over all the tasks")
    assert list(by_level) == ["high", "low"]
    assert by_level["high"]["latency"]["requests"] == 100 and by_level["high"]["slo_misses"] == 2
    assert by_level["high"]["latency"]["p50_seconds"] == pytest.approx(200e-6 + 100e-6 * 50 / 98)
    assert 7.5e-3 < by_level["high"]["latency"]["p99_seconds"] <= 10e-3
    assert by_level["low"]["failed"] == 2 and by_level["low"]["latency"]["requests"] == 10

    top = dworld.gpuslice("top", "--once")
    assert top.returncode == 0, top.stderr
    assert re.search(r"TASK LEVEL\s+TASKS\s+P50\s+P99\s+SLO MISSES\s+FAILED\n", top.stdout), top.stdout
    assert re.search(r"\bsvc\s+high\s+100\s.*\s2\s+0\n", top.stdout), top.stdout
    assert re.search(r"\bsvc\s+low\s+10\s.*\s0\s+2\n", top.stdout), top.stdout

    # Without the daemon, ls reads the ledger itself: the same counts.
    d.stop()
    alone = {t["level"]: t for t in dworld.ls("svc")["svc"]["task_levels"]}
    assert alone["high"]["latency"]["requests"] == 100 and alone["low"]["failed"] == 2
    open(go, "w").close()
    app.communicate(timeout=30)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not os.path.exists("/usr/bin/prometheus"), reason="Debian package prometheus not installed")
def test_a_real_prometheus_scrapes_the_daemon(dworld):
    d = dworld.daemon()
    ready, go = dworld.path("ready"), dworld.path("go")
    app = dworld.start("run", "--name", "prom", "--memory", "64MiB", "--", *dworld.app_cmd(
        ["init", "alloc", "16M", "ready", ready, "await", go]))
    dworld.wait_for_file(ready)
    record_lc_latency(dworld, "prom", (990, 80_000), (10, 6_000_000))
    work = tempfile.mkdtemp(prefix="gsd-prom-", dir="/tmp")
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpuslice\n"
                f"    static_configs:\n      - targets: ['127.0.0.1:{d.metrics_port}']\n")
    web = free_port()
    log = open(os.path.join(work, "prometheus.log"), "w")
    prom = subprocess.Popen(["/usr/bin/prometheus", f"--config.file={work}/prometheus.yml",
                             f"--storage.tsdb.path={work}/data", f"--web.listen-address=127.0.0.1:{web}",
                             "--log.level=warn"], stdout=log, stderr=log)
    try:
        def answered(promql):
            query = urllib.parse.quote(promql)
            assert prom.poll() is None, open(os.path.join(work, "prometheus.log")).read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{web}/api/v1/query?query={query}", timeout=2) as r:
                    result = json.loads(r.read())["data"]["result"]
            except OSError:
                return None
            return result or None

        started = time.monotonic()
        result = poll(lambda: answered('gpuslice_vgpu_memory_used_bytes{vgpu="prom"}'), 30,
                      "Prometheus answering a gpuslice query")
        print(f"Prometheus answered after {time.monotonic() - started:.1f} s")
        assert result[0]["metric"]["gpu"] == "0"
        assert result[0]["value"][1] == str(16 * MiB)
        # The LC histogram is one Prometheus reads as such: its quantile is the
        # one `gpuslice ls` reports (the 990th of 1000 requests tops the
        # (50, 100] µs bucket).
        result = answered('histogram_quantile(0.99, gpuslice_vgpu_lc_latency_seconds_bucket{vgpu="prom"})')
        assert result and float(result[0]["value"][1]) == pytest.approx(100e-6), result
        assert float(result[0]["value"][1]) == pytest.approx(dworld.ls("prom")["prom"]["lc_latency"]["p99_seconds"])
    finally:
        prom.kill()
        prom.wait(timeout=10)
        log.close()
        subprocess.run(["rm", "-rf", work])
        open(go, "w").close()
        app.communicate(timeout=30)
