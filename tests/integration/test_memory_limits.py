"""Hard memory limits through every allocation path and every way of finding
the driver, with real processes and the real CLI."""
import pytest

from conftest import CUDA_APP_LINKED, MiB, lines, value

LOOKUPS = ["dlsym", "procaddress", "ptds"]
INJECTS = ["preload", "libpath"]


@pytest.mark.parametrize("inject", INJECTS)
@pytest.mark.parametrize("lookup", LOOKUPS)
def test_allocations_stop_exactly_at_the_limit(world, inject, lookup):
    r = world.app(["--memory", "64MiB", "--inject", inject], ["init", "fill", "1M", "meminfo", "physical"],
                  lookup=lookup)
    assert r.returncode == 0, r.stderr
    assert value(r, "fill") == 64 * MiB
    assert lines(r, "meminfo")[-1][1:] == ["0", str(64 * MiB)]
    # The refused allocation never reached the driver.
    assert value(r, "physical") == 64 * MiB


@pytest.mark.parametrize("inject", INJECTS)
def test_an_application_linked_against_libcuda_is_limited(world, inject):
    r = world.app(["--memory", "32MiB", "--inject", inject], ["init", "fill", "1M"], lookup="link",
                  app=CUDA_APP_LINKED)
    assert r.returncode == 0, r.stderr
    assert value(r, "fill") == 32 * MiB


def test_device_size_and_free_memory_are_the_vgpus(world):
    r = world.app(["--memory", "64MiB"], ["init", "meminfo", "totalmem", "alloc", "16M", "meminfo"])
    assert r.returncode == 0, r.stderr
    infos = lines(r, "meminfo")
    assert infos[0][1:] == [str(64 * MiB), str(64 * MiB)]
    assert infos[1][1:] == [str(48 * MiB), str(64 * MiB)]
    assert value(r, "totalmem") == 64 * MiB


def test_a_refused_allocation_is_out_of_memory_and_frees_give_room_back(world):
    r = world.app(["--memory", "64MiB"], ["init", "alloc", "60M", "alloc", "8M", "free", "alloc", "64M", "physical"])
    assert [l[1] for l in lines(r, "alloc")] == ["ok", "oom", "ok"]
    assert value(r, "physical") == 64 * MiB


def test_pitched_and_managed_allocations_count(world):
    r = world.app(["--memory", "64MiB"], ["init", "pitch", "1000", "16K", "managed", "40M", "alloc", "16M",
                                          "meminfo"])
    assert [l[1] for l in lines(r, "pitch")] == ["ok"]
    assert [l[1] for l in lines(r, "managed")] == ["ok"]
    # pitch rounds 1000 up to 1024 bytes a row: 16 MiB; with 40 MiB managed, 16 MiB more does not fit.
    assert [l[1] for l in lines(r, "alloc")] == ["oom"]
    assert lines(r, "meminfo")[-1][1] == str(8 * MiB)


def test_vmm_physical_allocations_count_until_released(world):
    r = world.app(["--memory", "64MiB"], ["init", "vmm", "32M", "vmm", "34M", "free", "vmm", "64M", "vmm", "2M",
                                          "physical"])
    assert [l[1] for l in lines(r, "vmm")] == ["ok", "oom", "ok", "oom"]
    assert value(r, "physical") == 64 * MiB


def test_arrays_are_charged_their_true_size(world):
    # float4 1024x1024 = 16 MiB of rows; the fake pads each array to 64 KiB.
    r = world.app(["--memory", "64MiB"], ["init", "array", "1024", "1024", "array3d", "256", "256", "16",
                                          "mipmap", "512", "512", "4", "meminfo", "physical"])
    assert r.returncode == 0, r.stderr
    free_bytes, total = map(int, lines(r, "meminfo")[-1][1:])
    assert total - free_bytes == value(r, "physical")
    assert [l[1] for l in lines(r, "array")] == ["ok"]
    r = world.app(["--memory", "16MiB"], ["init", "array", "1024", "1024", "array", "1", "1"])
    assert [l[1] for l in lines(r, "array")] == ["ok", "oom"]


def test_async_allocations_are_charged_by_pool_reservation(world):
    # The fake's pools grow in 32 MiB chunks: the first 1 MiB reserves 32 MiB.
    r = world.app(["--memory", "64MiB"], ["init", "async", "1M", "meminfo", "async", "1M", "meminfo", "physical"])
    assert r.returncode == 0, r.stderr
    infos = lines(r, "meminfo")
    assert infos[0][1] == str(32 * MiB)
    assert infos[1][1] == str(32 * MiB)  # served from the reservation: not counted twice
    assert value(r, "physical") == 32 * MiB


def test_pool_growth_past_the_limit_is_refused_and_trims_give_memory_back(world):
    r = world.app(["--memory", "64MiB"], ["init", "pool", "poolalloc", "40M", "poolalloc", "30M", "free", "free",
                                          "sync", "trim", "meminfo", "poolalloc", "60M", "physical"])
    assert r.returncode == 0, r.stderr
    assert [l[1] for l in lines(r, "poolalloc")] == ["ok", "oom", "ok"]
    assert lines(r, "meminfo")[-1][1] == str(64 * MiB)
    assert value(r, "physical") <= 64 * MiB


@pytest.mark.parametrize("lookup", ["dlsym", "procaddress"])
def test_graph_memory_is_charged_when_the_graph_launches(world, lookup):
    r = world.app(["--memory", "64MiB"], ["init", "graph", "40M", "meminfo", "launch", "meminfo", "graph", "40M",
                                          "launch", "physical"], lookup=lookup)
    assert r.returncode == 0, r.stderr
    infos = lines(r, "meminfo")
    assert infos[0][1] == str(64 * MiB)  # instantiating allocates nothing
    assert infos[1][1] == str(24 * MiB)  # launching does
    assert [l[1] for l in lines(r, "launch")] == ["ok", "oom"]
    assert value(r, "physical") == 40 * MiB


def test_without_a_limit_nothing_is_refused(world):
    r = world.app([], ["init", "fill", "64M"])
    assert value(r, "fill") == 1024 * MiB  # the fake GPU's whole memory


def test_nvml_reports_the_vgpus_limit_and_usage(world):
    r = world.app(["--memory", "64MiB"], ["init", "alloc", "16M", "nvml"])
    assert r.returncode == 0, r.stderr
    assert lines(r, "nvml")[-1][1:] == [str(64 * MiB), str(16 * MiB)]


def test_each_gpu_has_its_own_limit(world):
    env = {"FAKE_GPU_COUNT": "2"}
    r = world.app(["--memory", "64MiB"], ["init", "0", "fill", "1M", "init", "1", "fill", "1M"], env=env)
    assert [int(l[1]) for l in lines(r, "fill")] == [64 * MiB, 64 * MiB]
