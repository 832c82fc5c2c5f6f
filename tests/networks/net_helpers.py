"""Shared helpers of the ajax.networks.networks tests (shapes, compiled builds)."""

import jax
import jax.numpy as jnp
import numpy as np

from ajax.networks.config import EnvSpaces, OptimizerConfig
from ajax.networks.networks import (
    get_initialized_actor_critic,
)

KEY = jax.random.key(0)
ARCH = ("8", "relu")
OPT = OptimizerConfig(learning_rate=1e-3)
ENV = EnvSpaces(obs_shape=(3,), action_dim=2, continuous=True)


def rngs(seed=0):
    return {"params": jax.random.key(seed), "dropout": jax.random.key(seed + 1)}


# On CPU nearly all the time goes to compiling; a test compiles one program (jax.jit) rather
# than each operation eagerly, and reuses the few networks and shapes below (obs 3, action 2,
# hidden 8), and checks what only needs shapes with jax.eval_shape (traced, never compiled).


def jinit(module, *args):
    """``module.init`` compiled whole."""
    return jax.jit(module.init)(rngs(), *args)


def numpy_variables(module, *args, seed=0):
    """Variables of ``module``'s structure drawn by numpy (no initializer to compile)."""
    rng = np.random.default_rng(seed)
    shapes = jax.eval_shape(module.init, rngs(), *args)
    return jax.tree.map(lambda s: jnp.asarray(rng.normal(0, 0.5, s.shape), s.dtype), shapes)


def normal(*shape, seed=1):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def build(net, env=ENV, **kwargs):
    """get_initialized_actor_critic compiled whole."""
    return jax.jit(lambda k: get_initialized_actor_critic(k, env, OPT, OPT, net, **kwargs))(KEY)


def leaves_equal(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))
