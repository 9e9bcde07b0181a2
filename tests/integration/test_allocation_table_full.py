"""A full allocation table refuses (allocation_table.h): every hook that
makes memory it cannot record frees what it made, gives the charge back and
returns CUDA_ERROR_OUT_OF_MEMORY, so nothing the library cannot find at its
free stays on the GPU uncharged, or charged for ever. The table is made tiny
through the library's test seam (GPUSLICE_TEST_ALLOCATION_TABLE_LOG2=2: four
live objects)."""
from conftest import MiB, lines, value

TINY_TABLE = {"GPUSLICE_TEST_ALLOCATION_TABLE_LOG2": "2"}


def results(r, command):
    return [l[1] for l in lines(r, command)]


def test_every_kind_of_allocation_is_refused_when_the_table_is_full(world):
    r = world.app(["--memory", "64MiB"],
                  ["init"] + ["alloc", "1M"] * 4 +
                  ["alloc", "1M", "pitch", "1024", "1024", "managed", "1M", "vmm", "2M", "array", "256", "256",
                   "mipmap", "64", "64", "2", "graph", "1M", "physical", "meminfo", "free", "alloc", "1M", "meminfo"],
                  env=TINY_TABLE)
    assert r.returncode == 0, r.stderr
    assert results(r, "alloc") == ["ok"] * 4 + ["oom", "ok"], r.stdout
    for command in ("pitch", "managed", "vmm", "array", "mipmap", "graph"):
        assert results(r, command) == ["oom"], (command, r.stdout)
    # What was made and refused was freed, and its charge given back.
    assert value(r, "physical") == 4 * MiB
    assert [l[1:] for l in lines(r, "meminfo")] == [[str(60 * MiB), str(64 * MiB)]] * 2
    assert "allocation table is full" in r.stderr


def test_a_mapping_that_cannot_be_recorded_is_refused(world):
    r = world.app(["--memory", "64MiB"],
                  ["init"] + ["alloc", "1M"] * 3 + ["vmm", "2M", "map", "2M", "physical", "meminfo", "free",
                                                   "physical", "meminfo"],
                  env=TINY_TABLE)
    assert r.returncode == 0, r.stderr
    assert results(r, "map") == ["oom"], r.stdout
    # Unmapped again; the handle (recorded) still holds its memory until
    # released, and then its charge goes.
    assert [l[1] for l in lines(r, "physical")] == [str(5 * MiB), str(3 * MiB)]
    assert [l[1] for l in lines(r, "meminfo")] == [str(59 * MiB), str(61 * MiB)]
