"""The import rules of CONTRIBUTING.md's layer map, read off the source (issue 38)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "ajax"
AGENTS = sorted(p.name for p in (SRC / "agents").iterdir() if (p / "__init__.py").is_file())


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = _module(path) if path.name == "__init__.py" else _module(path).rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                root = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(root + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
    return out


def files(*parts: str) -> list[Path]:
    return sorted(SRC.joinpath(*parts).rglob("*.py"))


def _hits(paths, bad) -> list[str]:
    return [
        f"{p.relative_to(SRC)} imports {m}" for p in paths for m in sorted(imports(p)) if bad(m)
    ]


def _agent_of(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["ajax", "agents"] and parts[2] in AGENTS:
        return parts[2]
    return None


@pytest.mark.parametrize("agent", [a for a in AGENTS if a != "shared"])
def test_no_agent_imports_another(agent):
    own = {agent, "shared"}
    bad = _hits(files("agents", agent), lambda m: _agent_of(m) not in (None, *own))
    assert not bad, bad


@pytest.mark.parametrize("agent", AGENTS)
def test_agents_reach_the_training_layer_through_its_api(agent):
    allowed = ("ajax.training.api", "ajax.training.config")
    bad = _hits(files("agents", agent),
                lambda m: m.startswith("ajax.training.") and not m.startswith(allowed))  # fmt: skip
    assert not bad, bad


def test_shared_agent_pieces_import_no_agent():
    bad = _hits(files("agents", "shared"), lambda m: _agent_of(m) not in (None, "shared"))
    assert not bad, bad


@pytest.mark.parametrize("layer", ["training", "environments", "networks", "modules", "buffers"])
def test_infrastructure_and_blocks_name_no_agent(layer):
    bad = _hits(files(layer), lambda m: _agent_of(m) is not None)
    assert not bad, bad


@pytest.mark.parametrize("layer", ["training", "agents", "buffers", "environments", "networks",
                                   "modules"])  # fmt: skip
def test_nothing_below_imports_the_experiments_layer(layer):
    bad = _hits(files(layer), lambda m: m.startswith("ajax.experiments"))
    assert not bad, bad


def test_blocks_and_environments_import_no_training():
    paths = [
        p for layer in ("environments", "networks", "modules", "buffers") for p in files(layer)
    ]
    bad = _hits(paths, lambda m: m.startswith("ajax.training"))
    assert not bad, bad


def test_networks_do_not_import_modules():
    bad = _hits(files("networks"), lambda m: m.startswith("ajax.modules"))
    assert not bad, bad


def test_leaf_modules_are_leaves():
    helpers = _hits([SRC / "jax_helpers.py"], lambda m: m.startswith("ajax"))
    types = _hits([SRC / "training" / "types.py"], lambda m: m.startswith("ajax.training"))
    assert not helpers and not types, helpers + types


# The command line (cli.py, cli_args.py, cli_flags.py, cli_presets.py) and the root modules it
# leans on reach the agents through the registry (ajax.agents) and the contracts their classes
# expose (config_cls, PROTOCOLS / from_protocol, OWN_FLAGS, multitask), never by name: a new
# agent's --protocol or flags need no edit here (issue 40). The package's __init__ keeps its
# lazy names (MCPretrain, ...), and a docstring may still name an agent.
ROOT = [p for p in sorted(SRC.glob("*.py")) if p.name not in ("__init__.py", "__main__.py")]


@pytest.mark.parametrize("path", ROOT, ids=lambda p: p.name)
def test_the_command_line_and_root_modules_name_no_agent(path):
    bad = _hits([path], lambda m: _agent_of(m) is not None)
    assert not bad, bad
