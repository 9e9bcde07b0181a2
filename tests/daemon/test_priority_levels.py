"""Priority levels from the daemon config (issue 12): `--priority NAME`
resolves through the node's levels, in the daemon and, through the levels it
stores in the state directory, in a standalone `run`/`set`; the level word in
the limits carries the rank the pacing board and the node schedule order by."""
import os

CONFIG = """version: 1
levels:
  - {name: gold, class: lc, slo_ms: 5}
  - {name: silver, class: lc}
  - {name: tin, class: be}
"""


def test_level_names_resolve_the_same_with_and_without_the_daemon(dworld):
    cfg = dworld.path("config.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    d = dworld.daemon(["--config", cfg])
    assert os.path.exists(os.path.join(dworld.state, "levels.yaml"))
    done = dworld.path("done")
    ready = dworld.path("ready")
    dworld.start("run", "--name", "g", "--priority", "gold", "--", *dworld.app_cmd(["ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    v = dworld.ls()["g"]
    assert (v["priority"], v["priority_level"], v["priority_rank"]) == ("lc", "gold", 1)

    # A name this node does not have is refused by name, listing the node's.
    r = dworld.gpuslice("run", "--name", "x", "--priority", "critical", "--", "true")
    assert r.returncode != 0
    assert "'critical' is not a priority level" in r.stderr and "gold, silver, lc, tin, be" in r.stderr, r.stderr
    assert "x" not in dworld.ls()

    r = dworld.gpuslice("set", "g", "--priority", "tin")
    assert r.returncode == 0, r.stderr
    v = dworld.ls()["g"]
    assert (v["priority"], v["priority_level"], v["priority_rank"]) == ("be", "tin", 0)  # the only be level: rank 0, with `be`

    # Without the daemon, the stored levels give the same answers.
    d.stop()
    r = dworld.gpuslice("set", "g", "--priority", "gold")
    assert r.returncode == 0, r.stderr
    v = dworld.ls()["g"]
    assert (v["priority"], v["priority_level"], v["priority_rank"]) == ("lc", "gold", 1)
    r = dworld.gpuslice("set", "g", "--priority", "critical")
    assert r.returncode != 0 and "gold, silver, lc, tin, be" in r.stderr, r.stderr
    r = dworld.gpuslice("run", "--name", "s", "--priority", "critical", "--", "true")
    assert r.returncode != 0 and "gold, silver, lc, tin, be" in r.stderr, r.stderr
    open(done, "w").close()


def test_a_node_without_levels_has_the_default_ones(dworld):
    dworld.daemon()
    assert not os.path.exists(os.path.join(dworld.state, "levels.yaml"))
    done = dworld.path("done")
    ready = dworld.path("ready")
    dworld.start("run", "--name", "c", "--priority", "critical", "--",
                 *dworld.app_cmd(["ready", ready, "await", done]))
    dworld.wait_for_file(ready)
    v = dworld.ls()["c"]
    assert (v["priority"], v["priority_level"], v["priority_rank"]) == ("lc", "critical", 1)
    # `ls` names a level above its class's lowest; `lc`/`be` stay as they were.
    r = dworld.gpuslice("ls", "c")
    assert r.returncode == 0 and "critical" in r.stdout, r.stdout
    open(done, "w").close()
