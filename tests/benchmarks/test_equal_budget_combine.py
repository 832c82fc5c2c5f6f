"""``benchmarks/equal_budget_report.py combine``: reports of the same equal-budget settings on
disjoint seeds (``dreamerv3_vs_official.py --first-seed``) merged into one, with the bar of
issue 36 recomputed over all seeds. From fake reports; no run needed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bench_loader import load_benchmark


def _report(first: int, finals_o, finals_a, **settings) -> dict:
    n = len(finals_o)
    curves = lambda fs: [[0.0, f] for f in fs]  # noqa: E731  (final = last point)
    return {
        "settings": {"size": "1m", "steps": 2, "seeds": n, "first_seed": first,
                     "final_frac": 0.5, "batch_size": 8, "batch_length": 32,
                     "train_ratio": 64.0, "envs": 1, **settings},
        "tasks": {"CartPole-v1": {
            "grid": [1, 2],
            "official": {"curves": curves(finals_o), "finals": list(finals_o),
                         "seeds": list(range(first, first + n)), "wall_s": 10.0,
                         "updates": [5] * n, "failures": []},
            "ajax": {"curves": curves(finals_a), "finals": list(finals_a),
                     "eval_curves": curves(finals_a), "seeds": list(range(first, first + n)),
                     "wall_s": 1.0, "failures": [], "env": "CartPole-v1"},
        }},
    }  # fmt: skip


def test_combine_merges_disjoint_seeds_and_recomputes_the_bar(tmp_path, capsys):
    """Seeds 2-3 and 0-1 of the same settings merge into one 4 + 4 report in seed order: the
    bar and the exact permutation test (C(8, 4) = 70 relabellings) over all seeds; the table
    is labelled by seed. Overlapping seeds, other settings or a missing file: exit 2."""
    rep = load_benchmark("equal_budget_report")
    late, early = _report(2, [30.0, 40.0], [35.0, 45.0]), _report(0, [10.0, 20.0], [5.0, 25.0])
    merged = rep.combine([late, early])
    cart = merged["tasks"]["CartPole-v1"]
    assert merged["settings"]["seed_list"] == [0, 1, 2, 3] and merged["settings"]["seeds"] == 4
    assert cart["official"]["finals"] == [10.0, 20.0, 30.0, 40.0]
    assert cart["ajax"]["finals"] == [5.0, 25.0, 35.0, 45.0]
    assert cart["official"]["seeds"] == [0, 1, 2, 3] and cart["official"]["wall_s"] == 20.0
    assert cart["official"]["updates"] == [5] * 4
    s = cart["summary"]
    assert s["official_mean"] == 25.0 and s["ajax_mean"] == 27.5 and not s["worst_ok"]
    assert s["permutation_p"] == rep.permutation_p(np.array([10.0, 20, 30, 40]),
                                                   np.array([5.0, 25, 35, 45]))  # fmt: skip
    assert s["worst_ok_if_same"] == 0.5
    table = rep.markdown(merged)
    assert "| task | side | seed 0 | seed 1 | seed 2 | seed 3 | mean |" in table
    # a task in one part only keeps that part's seeds; a side without its seed list (reports
    # made before --first-seed) takes its part's
    del early["tasks"]["CartPole-v1"]["ajax"]["seeds"]
    late["tasks"]["Pendulum-v1"] = late["tasks"]["CartPole-v1"]
    both = rep.combine([late, early])
    assert both["tasks"]["CartPole-v1"]["ajax"]["seeds"] == [0, 1, 2, 3]
    pend = both["tasks"]["Pendulum-v1"]
    assert pend["official"]["seeds"] == [2, 3] and pend["summary"]["official_mean"] == 35.0
    assert "| Pendulum-v1 | official | - | - | 30.0 | 40.0 | 35.0 |" in rep.markdown(both)
    with pytest.raises(ValueError, match="share seeds"):
        rep.combine([early, early])
    with pytest.raises(ValueError, match="different settings"):
        rep.combine([early, _report(2, [1.0], [1.0], train_ratio=32.0)])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(early))
    b.write_text(json.dumps(late))
    assert rep.main(["combine", str(a), str(b), "--out", str(tmp_path / "m")]) == 0
    written = json.loads((tmp_path / "m" / "dreamerv3_vs_official.json").read_text())
    assert written["tasks"]["CartPole-v1"]["summary"] == s
    for argv, says in ((["combine", str(a), str(a)], "share seeds"),
                       (["combine", str(tmp_path / "none.json")], "no such report")):  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            rep.main([*argv, "--out", str(tmp_path / "x")])
        assert exit_.value.code == 2 and says in capsys.readouterr().err.strip().splitlines()[-1]
