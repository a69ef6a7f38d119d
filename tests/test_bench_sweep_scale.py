"""bench (j), a sweep at scale: the vectorised anchor trains the toolkit's runs to the same outcome, and the
comparison notices a run that differs."""

from __future__ import annotations

import pandas as pd
import pytest

from lipschitz_icl.bench.anchor_vmap import AnchorRun, AnchorSetting, step_flops, train_anchor
from lipschitz_icl.bench.registry import Size
from lipschitz_icl.bench.sections.sweep_scale import agreement, sweep_scale


def test_sweep_scale_reports_both_targets_and_the_anchor_agrees_with_the_sweep():
    res = sweep_scale(Size("tiny"))
    row = res["rows"][0]
    assert row["runs"] == 4 and row["runs that differ"] == 0 and row["largest final-loss difference"] <= 1e-8
    targets = {t["name"]: t for t in res["targets"]}
    assert targets["(j) sweep runs/s / anchor runs/s"]["measured"] > 0
    assert [t["met"] for t in targets.values() if "agree" in t["name"]] == [True]
    assert row["floor s"] > 0 and row["sweep / floor"] > 1  # nothing beats the arithmetic


def test_agreement_notices_a_different_outcome_and_a_different_loss():
    setting = AnchorSetting(steps=40)
    runs = [AnchorRun(1.0, 3.0, 0), AnchorRun(3.0, 3.0, 1)]
    anchor = train_anchor(runs, setting)
    rows = pd.DataFrame([{"task.L": r.L, "train.lr": r.lr, "seed": r.seed, **a} for r, a in zip(runs, anchor,
                                                                                                   strict=True)])
    assert agreement(rows, anchor, runs, setting.eps) == (0, 0.0)
    moved = rows.assign(final_loss=rows["final_loss"] * (1 + 1e-6))
    assert agreement(moved, anchor, runs, setting.eps)[1] > 1e-8
    other = rows.assign(steps=rows["steps"] + 1)
    assert agreement(other, anchor, runs, setting.eps)[0] == 2


def test_step_flops_grow_with_the_draws_and_the_features():
    assert step_flops(AnchorSetting(draws=64)) == 2 * step_flops(AnchorSetting(draws=32))
    assert step_flops(AnchorSetting(K=10)) > 3 * step_flops(AnchorSetting(K=5))


def test_the_compiled_anchor_trains_the_same_runs_as_the_torch_anchor():
    pytest.importorskip("jax")
    from lipschitz_icl.bench.anchor_jax import train_anchor_jax

    setting = AnchorSetting(steps=60)
    runs = [AnchorRun(L, lr, seed) for L in (0.5, 4.0) for lr in (3.0, 30.0) for seed in (0, 1)]
    jax_rows, torch_rows = train_anchor_jax(runs, setting), train_anchor(runs, setting)
    assert [(r["status"], r["steps"], r["T_eps"]) for r in jax_rows] == [
        (r["status"], r["steps"], r["T_eps"]) for r in torch_rows]
    assert {r["status"] for r in torch_rows} >= {"converged", "budget"}  # both ends of the stopping rules
    for a, b in zip(jax_rows, torch_rows, strict=True):
        assert a["final_loss"] == pytest.approx(b["final_loss"], rel=1e-10, abs=1e-12)


def test_sweep_scale_without_jax_uses_the_torch_anchor(monkeypatch):
    from lipschitz_icl.bench.sections import sweep_scale as section

    monkeypatch.setattr(section, "HAS_JAX", False)
    monkeypatch.setattr(section, "anchor_trainer", lambda: ("torch", train_anchor))
    res = section.sweep_scale(Size("tiny"))
    assert res["rows"][0]["runs that differ"] == 0
