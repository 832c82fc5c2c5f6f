"""What ``ajax envs`` prints: the ids of each family and whether it works on this machine.

Cheap by construction: it imports each simulator package (that is the availability test)
and reads its registry, but builds no env.
"""

from __future__ import annotations

from typing import TypedDict

from ajax.environments.registry import FAMILIES, HOST_FAMILIES, family_ids, family_import_error


class FamilyInfo(TypedDict):
    """One env family as :func:`list_envs` reports it (a plain dict, ready to print or dump).

    Keys:
      jax: True for pure-JAX families, False for host ones.
      available: its simulator package imports here.
      reason: why not, when not available (the import error), else ``""``.
      ids: every id, as :func:`~ajax.environments.make_env` accepts it (empty if unavailable).
      blocked: ids that are registered but cannot be built here, with the reason.
      images: ids whose observations are images, with what they are and which agents take them.
      note: what the family offers beyond its ids (dmc: rendered pixels), or ``""``.
    """

    jax: bool
    available: bool
    reason: str
    ids: tuple[str, ...]
    blocked: dict[str, str]
    images: dict[str, str]
    note: str


# MinAtar (gymnax): 10 x 10 planes, one channel per object kind, values 0/1.
MINATAR_IMAGES = "image obs: 10 x 10 channel planes; agents: dreamerv3 (CNN), dqn, pqn"
CRAFTAX_IMAGES = "image obs: 63 x 63 RGB (--resize 64 for dreamerv3); agents: dreamerv3, dqn, pqn"
ATARI_NOTE = (
    "every id gives 96 x 96 gray frames, 4 emulator frames per step, sticky actions, up to 30 "
    "no-ops (DreamerV3's env.atari; its atari100k protocol: 64 x 64 RGB, not sticky); "
    "agents: dreamerv3, dqn, pqn"
)
DMC_PIXELS = (
    "every id also renders 64 x 64 RGB images with --pixels (make_env(..., pixels=True)), "
    "followed by the state with --proprio; headless rendering needs OSMesa (libosmesa6, "
    "installed by `make`) or EGL; agents: dreamerv3, tdmpc2 (images only)"
)


def list_envs(families: tuple[str, ...] = FAMILIES) -> dict[str, FamilyInfo]:
    """Each family's ids and availability, keyed by family (imports the simulators only)."""
    infos = {}
    for family in families:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; families: {FAMILIES}")
        error = family_import_error(family)
        ids = family_ids(family) if error is None else ()
        blocked = {}
        if family == "playground" and error is None:
            from ajax.environments.playground_env import playground_blocker

            blocked = {i: r for i in ids if (r := playground_blocker(i)) is not None}
        infos[family] = FamilyInfo(
            jax=family not in HOST_FAMILIES,
            available=error is None,
            reason=error or "",
            ids=ids,
            blocked=blocked,
            images={
                **{i: MINATAR_IMAGES for i in ids if i.endswith("-MinAtar")},
                **{i: CRAFTAX_IMAGES for i in ids if i.endswith("-Pixels-v1")},
            },
            note={"dmc": DMC_PIXELS, "atari": ATARI_NOTE}.get(family, ""),
        )
    return infos


def format_env_listing(infos: dict[str, FamilyInfo], max_ids: int | None = None) -> str:
    """Plain-text listing: one block per family, blocked ids marked, long lists cut."""
    lines = []
    for name, info in infos.items():
        kind = "jax" if info["jax"] else "host"
        status = "available" if info["available"] else f"NOT available ({info['reason']})"
        ids = info["ids"]
        lines.append(f"{name} [{kind}] {status}: {len(ids)} ids")
        if info["note"]:
            lines.append(f"  ({info['note']})")
        shown = ids if max_ids is None else ids[:max_ids]
        for env_id in shown:
            reason, image = info["blocked"].get(env_id), info["images"].get(env_id)
            note = f"  (blocked: {reason})" if reason else f"  ({image})" if image else ""
            lines.append(f"  {env_id}{note}")
        if len(shown) < len(ids):
            lines.append(f"  ... {len(ids) - len(shown)} more")
    return "\n".join(lines)
