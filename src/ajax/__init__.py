"""Ajax: Agents in JAX.

World-model agents (TD-MPC2, DreamerV3), the building blocks they share, and the networks
toolbox the model-free agents are built from.
"""

__version__ = "0.1.0"
