"""ajax.host_memory.keep_host_buffers: a call's temporaries are reused, not faulted in anew.

Each case runs in a fresh interpreter (the allocator settings are process-wide and must come
before JAX runs anything): one program whose temporary is a 64 MB matrix (15,625 pages), called
12 times, minor page faults counted per call. With the system allocator every call faults every
page in again; with keep_host_buffers the heap settles and later calls fault none in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import json, resource
    from ajax.host_memory import keep_host_buffers
    applied = keep_host_buffers()
    import jax, jax.numpy as jnp
    f = jax.jit(lambda x: (jnp.sin(jnp.outer(x, x)) @ x[:, None])[:, 0])
    x = jnp.linspace(0.0, 1.0, 4000)
    compiled = f.lower(x).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    jax.block_until_ready(compiled(x))
    faults = []
    for _ in range(12):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        jax.block_until_ready(compiled(x))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(json.dumps({"applied": applied, "pages": temp // 4096, "faults": faults}))
    """
)


def probe(**env) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_temporaries_are_reused_not_faulted_in_again():
    kept, system = probe(), probe(AJAX_SYSTEM_MALLOC="1")
    assert kept["applied"] and not system["applied"]
    assert kept["pages"] == system["pages"] >= 15_000
    # The system allocator unmaps the block after every call: every call faults it all in.
    assert min(system["faults"]) > 0.9 * system["pages"], system
    # Kept: once the heap has settled, a call faults (almost) nothing in.
    assert min(kept["faults"]) < 0.1 * kept["pages"], kept
    assert sum(kept["faults"]) < 0.8 * sum(system["faults"]), (kept, system)


def test_commands_keep_host_buffers_for_the_agents_that_ask(monkeypatch):
    """Every command builds its agent through cli._make_algo (train, resume, eval, collect,
    sweep), which calls keep_host_buffers first for DreamerV3 only."""
    import ajax.cli as cli
    import ajax.host_memory as host_memory

    calls = []
    monkeypatch.setattr(host_memory, "keep_host_buffers", lambda: calls.append(1) or True)
    for agent, expected in (("dreamerv3", 1), ("tdmpc2", 0), ("sac", 0)):
        calls.clear()
        cli._make_algo(agent, "Pendulum-v1", None)
        assert len(calls) == expected, agent
