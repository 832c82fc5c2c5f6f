"""DQN configuration (Mnih et al. 2015; defaults of stable-baselines3's DQN, presets of rl-zoo)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.training.api import OffPolicyConfig
from ajax.validation import at_least, between, positive, require


@dataclass(frozen=True)
class DQNConfig(OffPolicyConfig):
    """Deep Q-learning with replay, a target network and epsilon-greedy exploration.

    Defaults are stable-baselines3 2.x ``DQN``'s (lr 1e-4, batch 32, train_freq 4, Huber loss,
    gradient clip 10, epsilon 1 -> 0.05); :meth:`cartpole` is rl-zoo's tuned CartPole-v1 setting.

    Attributes:
        learning_rate: Adam step size.
        gamma: discount.
        hidden / num_layers: width and depth of the ReLU MLP.
        double: double-DQN target (van Hasselt et al. 2016): the online net picks a', the target
            net values it.
        dueling: dueling head (Wang et al. 2016).
        target_update_interval: gradient steps between target updates. SB3 counts env steps;
            counting updates makes the rule independent of ``train_freq``/``gradient_steps``.
        tau: target update rate at each such update (1.0: hard copy, as SB3's default).
        epsilon_start / epsilon_end / exploration_steps: epsilon decays linearly from start to
            end over the first ``exploration_steps`` env steps (all envs together; SB3's
            ``exploration_fraction`` times the run length), then stays at end.
        max_grad_norm: global gradient-norm clip.
    """

    learning_rate: float = 1e-4
    gamma: float = 0.99
    hidden: int = 64
    num_layers: int = 2
    double: bool = True
    dueling: bool = False
    target_update_interval: int = 10_000
    tau: float = 1.0
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_steps: int = 100_000
    max_grad_norm: float = 10.0
    batch_size: int = 32
    learning_starts: int = 100
    train_freq: int = 4

    RULES = {
        "learning_rate": positive(),
        "gamma": between(0.0, 1.0),
        "hidden": positive(),
        "num_layers": at_least(1),
        "target_update_interval": positive(),
        "tau": between(0.0, 1.0, lo_open=True),
        "epsilon_start": between(0.0, 1.0),
        "epsilon_end": between(0.0, 1.0),
        "exploration_steps": positive(),
        "max_grad_norm": positive(),
    }

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.epsilon_end <= self.epsilon_start,
            "epsilon_end",
            f"<= epsilon_start ({self.epsilon_start}): exploration decays",
        )

    @classmethod
    def cartpole(cls, **overrides) -> DQNConfig:
        """rl-zoo's CartPole-v1 DQN (hyperparams/dqn.yml; the preset ``dqn-cartpole-rlzoo``):
        lr 2.3e-3, batch 64, 256-wide net, 128 updates every 256 steps, target synced at each
        update phase, epsilon -> 0.04 over 16% of 50k steps."""
        return cls.from_preset("dqn-cartpole-rlzoo", **overrides)
