"""UDRL configuration (Srivastava et al. 2019, arXiv:1912.02877; Schmidhuber 2019, 1912.02875)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.networks.utils import ACTIVATIONS
from ajax.training.api import LoopConfig
from ajax.validation import at_least, nonnegative, one_of, positive, require


@dataclass(frozen=True)
class UDRLConfig(LoopConfig):
    """Upside-down RL: a behaviour function B(a | s, d_r, d_h) trained by maximum likelihood on
    its own best episodes, relabelled with the return and horizon that followed each state.

    The paper's loop (Srivastava et al. 2019, Alg. 1) alternates "train B for n updates" with
    "run n episodes under exploratory commands"; here the vmapped envs run ``n_steps`` each
    between the ``n_updates`` of an update, so episodes span rollouts and no env idles.

    Attributes:
        n_envs / n_steps: envs stepped in parallel and steps per env between updates.
        store_size: episodes kept, always the highest-return ones seen (the paper's replay
            buffer, sorted by return).
        last_few: the best stored episodes the exploratory command is drawn from (Alg. 2: the
            horizon is their mean length, the desired return uniform in [mean, mean + std]).
        command_spread: a floor under that std, as a fraction of |mean|: the return is drawn
            from [mean, mean + max(std, command_spread |mean|)]. 0 is Alg. 2. Ajax's option:
            on CartPole-v1 the best episodes come to share one return (std 0), so Alg. 2 asks
            for nothing new and learning stalls (docs/model_free.md M15); 0.1 solves it.
        batch_size / n_updates: (state, command, action) samples per step, steps per update.
        learning_rate: Adam step size.
        hidden / num_layers / activation: the MLP of B; the command joins the observation after
            the encoder (spec 002: a CNN's output on images, the raw observation otherwise).
        return_scale / horizon_scale: the command's input scale (the paper's c).
        max_episode_steps: the longest episode the store records (None: the env's time limit,
            which an env without one must then be given).
        eval_command_return / eval_command_horizon: the command (d_r, d_h) the deterministic
            evaluation gives at each episode start, e.g. 500 and 500 for CartPole-v1's best
            episode; None (both): the top of the exploratory range, the ``last_few`` best
            episodes' mean plus std of return and their mean length (Alg. 2). A fixed command
            is Ajax's option, beside Alg. 2's; the exploratory one asks for what the store
            holds already, so an agent that follows commands well scores the store's mean.

    The numbers are of the order of the paper's tuned values (Sec. 4, App. A: batch 768, c of
    0.01-0.02, last_few 25-100, lr ~1e-3); the defaults were chosen on CartPole-v1 here.
    """

    n_envs: int = 16
    n_steps: int = 64
    store_size: int = 300
    last_few: int = 50
    command_spread: float = 0.0
    batch_size: int = 256
    n_updates: int = 50
    learning_rate: float = 1e-3
    hidden: int = 64
    num_layers: int = 2
    activation: str = "relu"
    return_scale: float = 0.02
    horizon_scale: float = 0.01
    max_episode_steps: int | None = None
    eval_command_return: float | None = None
    eval_command_horizon: float | None = None
    eval_freq: int = 16_384

    RULES = {
        "n_steps": positive(),
        "store_size": positive(),
        "last_few": positive(),
        "command_spread": nonnegative(),
        "batch_size": positive(),
        "n_updates": positive(),
        "learning_rate": positive(),
        "hidden": positive(),
        "num_layers": at_least(1),
        "activation": one_of(*ACTIVATIONS),
        "return_scale": positive(),
        "horizon_scale": positive(),
        "max_episode_steps": positive(optional=True),
        "eval_command_horizon": at_least(1, optional=True),
    }

    def relations(self) -> None:
        super().relations()
        require(self, self.last_few <= self.store_size, "last_few",
                f"<= store_size ({self.store_size}): the command comes from stored episodes")  # fmt: skip
        require(self, self.n_envs <= self.store_size, "store_size",
                f">= n_envs ({self.n_envs}): each step can end an episode in every env")  # fmt: skip
        require(self, (self.eval_command_return is None) == (self.eval_command_horizon is None),
                "eval_command_horizon", "set together with eval_command_return (one command)",
                "give both, or neither for the exploratory command")  # fmt: skip
        rollout = self.n_envs * self.n_steps
        require(self, self.eval_freq >= rollout, "eval_freq",
                f">= n_envs * n_steps = {rollout} (evaluations fall between whole rollouts)")  # fmt: skip
