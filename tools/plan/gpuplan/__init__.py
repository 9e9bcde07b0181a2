"""gpuplan: a capacity simulator for gpuslice (docs/plan.md).

A discrete-event simulation of the GPU's timeslice scheduler (sim.py), the
pacing board's turns and holds (board.py), workload models (workloads.py),
the policy's slices (scenario.py), and the validation against the measured
workload matrix (matrix.py). Standard library only; single-threaded.
"""
