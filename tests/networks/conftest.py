"""Fixtures of the ajax.networks.networks tests: one SAC-like and one PPO-like pair."""

import pytest
from tests.networks.net_helpers import ARCH, build

from ajax.networks.config import EnvSpaces, NetworkConfig


@pytest.fixture(scope="module")
def sac():
    """A SAC-like pair: squashed Gaussian actor, twin Q critics with a target."""
    net = NetworkConfig(actor_architecture=ARCH, critic_architecture=ARCH)
    return build(net, continuous=True, action_value=True, squash=True, num_critics=2)


@pytest.fixture(scope="module")
def ppo():
    """A PPO-like pair: state-independent log-std, two V critics, linear lr decay."""
    net = NetworkConfig(
        actor_architecture=ARCH, critic_architecture=ARCH, state_independent_log_std=True,
        log_std_init=0.0, log_std_bounds=None,
    )  # fmt: skip
    env = EnvSpaces(obs_shape=(3,), action_dim=2, continuous=True, n_envs=4)
    return build(net, env, continuous=True, num_critics=2, max_timesteps=10)
