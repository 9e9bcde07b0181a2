"""The extension exports Python's entry point and nothing else. Any other
global symbol can bind into libraries loaded after it: GNU_UNIQUE objects
do even under RTLD_LOCAL, and a copy of libstdc++'s exported that way made
`import gpuslice; import torch` abort (docs/benchmarks.md, "Priority
levels"). python/src/gpuslice_module.map keeps the rest local."""
import glob
import os
import subprocess

from conftest import BUILD


def defined_dynamic_symbols(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


def test_the_extension_exports_only_its_entry_point():
    (ext,) = glob.glob(os.path.join(BUILD, "python", "gpuslice", "_gpuslice*.so"))
    symbols = defined_dynamic_symbols(ext)
    assert symbols == ["PyInit__gpuslice"], \
        f"{ext} exports {len(symbols)} symbols ({symbols[:5]}...): link it with python/src/gpuslice_module.map"
