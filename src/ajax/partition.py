"""The data layout's marker: an env or batch axis split over the active mesh's "data" axis.

Shared by the loop (``ajax.training``) and the replays (``ajax.buffers``), below both; how runs
are laid out over devices is ``ajax.training.sharding``.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import PartitionSpec


def constrain_data(tree: Any, axis: int = 0) -> Any:
    """Mark ``axis`` of every leaf (an env or batch axis; under the seed vmap, the unbatched
    shape) as split over the active mesh's "data" axis; ``tree`` unchanged when no data mesh is
    active or a leaf's axis does not divide (a single env stays whole on every device)."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or "data" not in mesh.axis_names:
        return tree
    n = mesh.shape["data"]
    spec = PartitionSpec(*([None] * axis), "data")

    def one(x):
        if x.ndim <= axis or x.shape[axis] % n:
            return x
        return jax.lax.with_sharding_constraint(x, spec)

    return jax.tree.map(one, tree)
