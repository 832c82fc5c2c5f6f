"""The published-curve extract: small, shipped as package data, its provenance written down,
and (where the official trees are on this machine) remade byte for byte by its script."""

from __future__ import annotations

import importlib.util
import os
import tomllib
from pathlib import Path

import pytest

from ajax.experiments import reference

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "ajax" / "experiments" / "reference_data"
# the read-only official trees beside the checkout, where present (AJAX_REFERENCE moves them)
OFFICIAL = Path(os.environ.get("AJAX_REFERENCE", ROOT.parent / "shared" / "reference"))


def test_extract_is_small_and_shipped():
    assert sum(p.stat().st_size for p in DATA.glob("*.json*")) < 2_000_000
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = setup["package-data"]["ajax.experiments"]
    assert {"reference_data/*.json.gz", "reference_data/*.json", "reference_data/*.md"} <= set(
        shipped
    )


def test_provenance_names_every_source_file():
    text = (DATA / "PROVENANCE.md").read_text()
    files = {c.file for c in reference._curves().values()}
    dirs = {f.rsplit("/", 1)[0] for f in files if f.startswith("tdmpc2/results/")}
    for name in {f for f in files if f.startswith("dreamerv3/")} | {"dreamerv3/baselines.yaml"}:
        assert name in text, name
    assert "tdmpc2/results/{tdmpc2,sac,dreamerv3}/<task>.csv" in text and len(dirs) == 3
    assert "e9f5932" in text and "e3f0224" in text and "make_extract.py" in text


def test_every_curve_is_well_formed():
    curves = reference._curves()
    assert {(s, suite) for s, suite, _ in curves} == {
        ("tdmpc2", "tdmpc2"), ("sac", "tdmpc2"), ("dreamerv3", "tdmpc2"),
        ("dreamerv3", "dmc_proprio"), ("dreamerv3", "dmc_vision"), ("dreamerv3", "atari100k"),
    }  # fmt: skip
    for c in curves.values():
        assert c.y.shape == (len(c.seeds), len(c.x)) and (c.x[1:] > c.x[:-1]).all()
    atari = {t for s, suite, t in curves if suite == "atari100k"}
    assert atari == set(reference.atari_scores()) and len(atari) == 26


@pytest.mark.slow
@pytest.mark.skipif(not OFFICIAL.is_dir(), reason="the official trees are not on this machine")
def test_the_script_remakes_the_extract(tmp_path):
    spec = importlib.util.spec_from_file_location("make_extract", DATA / "make_extract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--reference", str(OFFICIAL), "--out", str(tmp_path)])
    for name in ("curves.json.gz", "atari_scores.json"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
