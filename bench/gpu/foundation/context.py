#!/usr/bin/env python3
"""The size of one CUDA context as PyTorch makes it, outside gpuslice: the real
usage (nvidia-smi) of a process that ran torch.cuda.init() and
torch.zeros(1, device='cuda'), less what torch's allocator reserved. Checks 2-5
allow real usage up to the limit plus this; it is cached for them."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402


def body():
    info = common.context_mib()
    return info["context_mib"] > 0, info


if __name__ == "__main__":
    sys.exit(common.run_check("context", body))
