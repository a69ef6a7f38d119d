"""``reproduce`` by claim: claim ids and suite names select the experiments to run; unknown names
exit 2 naming the allowed ones; a log line per experiment when output is not a terminal."""

import json

import fake_experiments
import pytest
from typer.testing import CliRunner

from lipschitz_icl.cli import app
from lipschitz_icl.errors import UserInputError
from lipschitz_icl.experiments import claim_ids, experiments_for, registered, registry
from lipschitz_icl.reproduce import resolve_targets

cli = CliRunner()


def test_claim_ids_select_exactly_the_experiments_that_test_them():
    names, chosen = resolve_targets(["p4", "B3"])  # any case
    assert names == ["P4", "B3"]
    expected = [e for e in registered() if {"P4", "B3"} & set(e.claims)]
    assert chosen == expected and 0 < len(chosen) < len(registered())


def test_suites_and_claims_mix_each_experiment_once_in_order():
    _, chosen = resolve_targets(["linear", "P1", "linear"])
    linear = experiments_for(["linear"])
    assert all(e in chosen for e in linear) and len(chosen) == len(set(chosen))
    assert any("P1" in e.claims for e in chosen)
    order = [registered().index(e) for e in chosen]
    assert order == sorted(order)


def test_unknown_target_names_the_allowed_ones():
    with pytest.raises(UserInputError, match="'P99' is neither a suite, a paper nor a claim id.*paper.*li2025.*R8"):
        resolve_targets(["P4", "P99"])
    res = cli.invoke(app, ["reproduce", "P99", "--quick"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "P99" in res.output and all(c in res.output for c in claim_ids())


def test_reproduce_one_claim_runs_only_its_experiment_and_logs_it(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_EXPERIMENTS", dict(fake_experiments.FAKE_REGISTRY))
    out = tmp_path / "o"
    res = cli.invoke(app, ["reproduce", "P3", "--quick", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads((out / "claims.json").read_text())
    assert [c["id"] for c in data["claims"]] == ["P3"]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["last"]  # exp_first, exp_slow never ran
    assert "started exp_last" in res.output and "finished exp_last in" in res.output
    assert "exp_first" not in res.output
    again = cli.invoke(app, ["reproduce", "P3", "--quick", "--out", str(out)])  # same options: resumes
    assert again.exit_code == 0 and "reused exp_last" in again.output
