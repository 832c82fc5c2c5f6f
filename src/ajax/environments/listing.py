"""What ``ajax envs`` prints: the ids of each family and whether it works on this machine.

Cheap by construction: it imports each simulator package (that is the availability test)
and reads its registry, but builds no env.
"""

from __future__ import annotations

import dataclasses

from ajax.environments.registry import FAMILIES, HOST_FAMILIES, family_ids, family_import_error


@dataclasses.dataclass(frozen=True)
class FamilyInfo:
    """One env family as :func:`list_envs` reports it.

    Attributes:
      name: the family (``gymnax``, ``playground``, ``brax``, ``gymnasium``, ``dmc``).
      jax: True for pure-JAX families, False for host ones.
      available: its simulator package imports here.
      error: the import error when not available.
      ids: every id, as :func:`~ajax.environments.make_env` accepts it (empty if unavailable).
      blocked: ids that are registered but cannot be built here, with the reason.
    """

    name: str
    jax: bool
    available: bool
    error: str | None
    ids: tuple[str, ...]
    blocked: dict[str, str] = dataclasses.field(default_factory=dict)


def list_envs(families: tuple[str, ...] = FAMILIES) -> tuple[FamilyInfo, ...]:
    """Every family's ids and availability (imports the simulators, builds no env)."""
    infos = []
    for family in families:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; families: {FAMILIES}")
        error = family_import_error(family)
        ids = family_ids(family) if error is None else ()
        blocked = {}
        if family == "playground" and error is None:
            from ajax.environments.playground_env import playground_blocker

            blocked = {i: r for i in ids if (r := playground_blocker(i)) is not None}
        infos.append(
            FamilyInfo(family, family not in HOST_FAMILIES, error is None, error, ids, blocked)
        )
    return tuple(infos)


def format_env_listing(infos: tuple[FamilyInfo, ...], max_ids: int | None = None) -> str:
    """Plain-text listing: one block per family, blocked ids marked, long lists cut."""
    lines = []
    for info in infos:
        kind = "jax" if info.jax else "host"
        status = "available" if info.available else f"NOT available ({info.error})"
        lines.append(f"{info.name} [{kind}] {status}: {len(info.ids)} ids")
        shown = info.ids if max_ids is None else info.ids[:max_ids]
        for env_id in shown:
            reason = info.blocked.get(env_id)
            lines.append(f"  {env_id}" + (f"  (blocked: {reason})" if reason else ""))
        if len(shown) < len(info.ids):
            lines.append(f"  ... {len(info.ids) - len(shown)} more")
    return "\n".join(lines)
