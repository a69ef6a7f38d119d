"""``kernel_spec`` builds a spec once for configs that differ only in their training loop (eta, budget, epsilon,
logging): each gets a copy sharing the tensors and a count generator of its own."""

from concurrent.futures import ThreadPoolExecutor

import torch

import lipschitz_icl as li
from lipschitz_icl.engines import kernel_spec as ks
from lipschitz_icl.problem import build_problem


def _spec(*overrides: str) -> ks.KernelSpec:
    return ks.kernel_spec(build_problem(li.load_config("configs/quickstart.yaml", ["engine.draws=8", *overrides])))


def test_runs_that_differ_in_their_loop_share_a_spec_with_generators_of_their_own():
    ks._RECENT_SPECS.clear()
    a = _spec("train.lr=0.5", "train.optimizer=sgd")
    b = _spec("train.lr=3", "train.steps=7", "train.eps=1e-6", "train.optimizer=sgd")
    assert a.sigma is b.sigma and a.counts is b.counts and a.tests is b.tests  # built once
    assert a.count_gen is not b.count_gen
    first = a.new_counts()  # a's later draws leave b's generator where it was
    assert torch.equal(b.new_counts(), first)
    ks._RECENT_SPECS.clear()
    fresh = _spec("train.lr=3", "train.optimizer=sgd")  # built anew: the same draws
    assert torch.equal(fresh.counts, a.counts) and torch.equal(fresh.new_counts(), first)


def test_anything_else_builds_its_own_spec():
    ks._RECENT_SPECS.clear()
    base = _spec()
    for other in (["seed=1"], ["task.L=3"], ["prompt.N=9"], ["engine.draws=9"], ["eval.functions=5"],
                  ["train.optimizer=sgd"]):
        spec = _spec(*other)
        assert spec.sigma is not base.sigma, other
    assert not torch.equal(_spec("seed=1").counts, base.counts)


def test_large_specs_are_not_kept(monkeypatch):
    ks._RECENT_SPECS.clear()
    monkeypatch.setattr(ks, "KEPT_ELEMENTS", 10)  # the quickstart's draws and test Sigma hold more
    assert _spec("train.lr=0.5").sigma is not _spec("train.lr=3").sigma
    assert not ks._RECENT_SPECS


def test_threads_sharing_the_kept_specs_get_their_own_numbers(monkeypatch):
    """Threads building specs at once (run_many from a thread pool), with evictions at every call."""
    monkeypatch.setattr(ks, "RECENT_SPECS", 1)
    problems = [build_problem(li.load_config("configs/quickstart.yaml", ["engine.draws=8", f"seed={s}",
                                                                         f"train.lr={lr}"]))
                for s in range(4) for lr in (0.5, 2.0)]
    expected = [ks._kernel_spec(p).counts for p in problems]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            got = list(pool.map(lambda p: ks.kernel_spec(p).counts, problems))
            assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))


def test_a_batch_builds_each_spec_once_however_its_configs_are_ordered(monkeypatch):
    """``batch.plan_groups`` builds the configs that differ only in their loop one after another: a batch with eta
    outermost and more seeds than the specs kept (a 10,000-run sweep's batch: 5 etas x 100 seeds) builds one spec
    per seed, not one per run."""
    from lipschitz_icl.batch import plan_groups

    monkeypatch.setattr(ks, "RECENT_SPECS", 3)
    ks._RECENT_SPECS.clear()
    built = []
    real = ks._kernel_spec
    monkeypatch.setattr(ks, "_kernel_spec", lambda problem: built.append(problem.config.seed) or real(problem))
    cfgs = [li.load_config("configs/quickstart.yaml", ["engine.draws=4", f"seed={s}", f"train.lr={lr}"])
            for lr in (0.5, 1.0, 2.0) for s in range(5)]
    groups, rest, _ = plan_groups(cfgs)
    assert sorted(built) == list(range(5))
    assert groups == [list(range(15))] and rest == []  # the batch itself in the configs' order


def test_the_diagonal_of_sigma_is_found_once_and_again_for_another_or_changed_sigma(monkeypatch):
    """``KernelSpec.sigma_diagonal``: made once for a spec and the copies of it that kernel_spec hands out, again
    for a replaced Sigma or one changed in place."""
    import dataclasses

    ks._RECENT_SPECS.clear()
    calls = []
    monkeypatch.setattr(ks, "diagonal_of", lambda s: calls.append(s) or li.engines.kernel_grad.diagonal_of(s))
    a = _spec("train.lr=0.5")
    b = _spec("train.lr=2")  # a copy of the kept spec
    assert a.sigma_diagonal() is not None and torch.equal(a.sigma_diagonal(), b.sigma_diagonal()) and len(calls) == 1
    dense = dataclasses.replace(a, sigma=a.sigma + 0.01)  # off the diagonal too
    assert dense.sigma_diagonal() is None and len(calls) == 2
    changed = dataclasses.replace(a, sigma=a.sigma.clone())
    assert changed.sigma_diagonal() is not None
    changed.sigma[0, 1] = changed.sigma[1, 0] = 0.5  # in place
    assert changed.sigma_diagonal() is None and len(calls) == 4
