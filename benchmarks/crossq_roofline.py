"""CrossQ's update against the matmul roofline (called by model_free_speed.py after CrossQ's
rows): how close Ajax's update runs to the matmul peak, and the ratio to each peer that an
update at that peak would reach."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
from tdmpc2_speed import matmul_flops, matmul_gflops

from ajax.agents.crossq import CrossQ, CrossQConfig
from ajax.agents.crossq import update as crossq_update
from ajax.agents.shared.soft_actor_critic import min_q, policy_step
from ajax.training.off_policy import Transition


def crossq_roofline(
    rows: dict, steps: int, hidden: int, critic: int, batch: int, learning_starts: int
) -> None:
    """CrossQ's update against the matmul roofline, and the ratio to each peer that an update
    at the roofline would reach: the ceiling of ``ajax / it`` on this CPU.

    Ajax's update is timed alone (300 updates in one scan on a fixed batch, the policy delay
    included); its matmul GFLOP are counted off the jaxpr (the actor step at one update in
    ``policy_delay``); the roofline is a (2 B) x width x width matmul's GFLOP/s. A peer's ms per update is its run time over its
    updates (its 1,000 random steps are cheap beside them).
    """
    config = CrossQConfig(hidden=hidden, critic_hidden=critic, batch_size=batch)
    env = CrossQ(env="Pendulum-v1", config=config).env
    state = crossq_update.init(config, jax.random.PRNGKey(0), env)
    k = jax.random.split(jax.random.PRNGKey(1), 4)
    replayed = Transition(
        obs=jax.random.normal(k[0], (batch, 3)),
        action=jax.random.uniform(k[1], (batch, 1), minval=-1.0, maxval=1.0),
        reward=jax.random.normal(k[2], (batch,)),
        terminated=jnp.zeros((batch,)),
        next_obs=jax.random.normal(k[3], (batch, 3)),
    )
    n = 300

    def run(state, key):
        one = lambda s, k: (crossq_update.update(config, s, replayed, k)[0], None)
        return jax.lax.scan(one, state, jax.random.split(key, n))[0]

    key = jax.random.PRNGKey(2)
    compiled = jax.jit(run).lower(state, key).compile()
    jax.block_until_ready(compiled(state, key))
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(state, key))
    ms = 1e3 * (time.perf_counter() - t0) / n
    # the counter charges the actor step's cond branch to every update; it runs every
    # policy_delay-th, so take the rest of its share back off
    actor = jax.make_jaxpr(
        lambda s, k: policy_step(config, s, s.critic_state, replayed.obs, 1, k, min_q)
    )(state, key)
    unused = matmul_flops(actor.jaxpr) * (1 - 1 / config.policy_delay)
    gflop = (matmul_flops(jax.make_jaxpr(run)(state, key).jaxpr) / n - unused) / 1e9
    peak = matmul_gflops(2 * batch, critic, critic)
    floor = gflop / peak * 1e3
    print(f"crossq update alone: {ms:.1f} ms, {gflop:.2f} matmul GFLOP -> {gflop / ms * 1e3:.0f} "
          f"GFLOP/s, {floor / ms:.2f} of the {peak:.0f} GFLOP/s roofline ({floor:.1f} ms)")  # fmt: skip
    updates = steps - learning_starts
    for name, sps in rows.items():
        if name != "ajax" and sps is not None:
            peer_ms = 1e3 * steps / sps / updates
            print(f"crossq {name}: {peer_ms:.1f} ms per update; at the roofline ajax / {name} "
                  f"would be {peer_ms / floor:.2f}")  # fmt: skip
