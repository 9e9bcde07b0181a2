"""MNIST-shaped JAX training for the overhead experiment (run_papers.py),
run only where JAX with a GPU backend is installed: an MLP 784-512-512-10,
softmax cross-entropy, SGD, one jitted step, synthetic data on the GPU;
every step ends in block_until_ready(). XLA_PYTHON_CLIENT_PREALLOCATE=false
is set by the parent (both arms), so JAX does not take 75% of the GPU.

    python3 mnist_jax.py phases OUT.json     PHASES="64:3,2048:3"

Env: READY_FILE, GO_FILE as for mnist_torch.py.
"""
import json
import os
import sys
import time

import jax
import jax.numpy as jnp


def make(batch):
    key = jax.random.PRNGKey(0)
    sizes = (784, 512, 512, 10)
    keys = jax.random.split(key, len(sizes) + 1)
    params = [(jax.random.normal(k, (a, b)) * (2.0 / a) ** 0.5, jnp.zeros(b))
              for k, a, b in zip(keys, sizes, sizes[1:])]
    x = jax.random.normal(keys[-2], (batch, 784))
    y = jax.nn.one_hot(jax.random.randint(keys[-1], (batch,), 0, 10), 10)

    def loss(ps):
        h = x
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            if i < len(ps) - 1:
                h = jax.nn.relu(h)
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(h), axis=1))

    @jax.jit
    def update(ps):
        g = jax.grad(loss)(ps)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(ps, g)]

    state = {"p": params}

    def step():
        state["p"] = update(state["p"])
        jax.tree_util.tree_map(lambda a: a.block_until_ready(), state["p"])

    return step


def main():
    mode, out = sys.argv[1], sys.argv[2]
    if mode != "phases":
        raise SystemExit("mnist_jax: only the phases mode")
    platforms = sorted({d.platform for d in jax.devices()})
    if "gpu" not in platforms and "cuda" not in platforms:
        raise SystemExit(f"mnist_jax: no GPU backend (devices: {platforms})")
    phases = [(int(b), float(s)) for b, s in (p.split(":") for p in os.environ.get("PHASES", "64:3,2048:3").split(","))]
    steps = {}
    for b, _ in phases:
        steps[b] = make(b)
        for _ in range(30):
            steps[b]()
    if os.environ.get("READY_FILE"):
        open(os.environ["READY_FILE"], "w").close()
    go = os.environ.get("GO_FILE")
    give_up = time.monotonic() + 600
    while go and not os.path.exists(go):
        if time.monotonic() > give_up:
            raise SystemExit("mnist_jax: no GO_FILE in time")
        time.sleep(0.01)
    res = {"pid": os.getpid(), "jax": jax.__version__, "model": "MLP 784-512-512-10", "phases": {}}
    for b, secs in phases:
        step = steps[b]
        times, t0 = [], time.monotonic()
        while time.monotonic() < t0 + secs:
            a = time.monotonic()
            step()
            times.append(time.monotonic() - a)
        el = time.monotonic() - t0
        times.sort()
        res["phases"][str(b)] = {"steps": len(times), "seconds": round(el, 4), "steps_per_s": round(len(times) / el, 3),
                                 "median_step_ms": round(1000 * times[len(times) // 2], 4)}
    with open(out + ".tmp", "w") as f:
        json.dump(res, f)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
