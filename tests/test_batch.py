"""Batched runs (run_many) against one-by-one runs: identical metrics and summaries."""

import importlib.util

import pandas as pd
import pytest
import torch

import lipschitz_icl as li
from lipschitz_icl.batch import plan_groups, run_many

SHORT = ["train.steps=120", "train.log_every=7", "eval.functions=32", "engine.draws=48"]


def _same(a: li.Run, b: li.Run) -> None:
    pd.testing.assert_frame_equal(a.metrics, b.metrics, check_exact=True)
    sa = {k: v for k, v in a.summary.items() if k != "wall_s"}
    sb = {k: v for k, v in b.summary.items() if k != "wall_s"}
    assert sa == sb


def _configs(variants: list[list[str]]) -> list[li.Config]:
    return [li.load_config(None, [*SHORT, *v]) for v in variants]


# runs that differ in L, eta, seed, task class, p_k, N, tau, budget, epsilon and logging, and
# runs the batched path must leave alone (Adam, the sampled engine)
VARIANTS = [
    ["task.L=0.5", "seed=0"],
    ["task.L=2", "seed=1", "train.lr=0.5"],
    ["task.L=8", "seed=2", "train.lr=0.1", "train.log_every=5"],
    ["task.L=3", "train.eps=0.05"],  # converges between log steps
    ["task.L=2", "train.steps=40"],
    ["task.L=1", "prompt.N=20", "features.probs=imbalanced"],
    ["task.kind=relu_net", "task.kernel_samples=256", "seed=3"],
    ["task.kind=relu_net", "task.kernel_samples=256", "seed=4", "train.lr=2"],
    ["task.kind=sinusoid", "task.kernel_samples=256"],
    ["features.kind=gaussian", "features.d=7", "task.L=2"],  # preconditioned by G = V^T V
    ["features.kind=gaussian", "features.d=7", "task.L=4", "seed=5"],
    ["task.label_noise=0.3", "seed=6"],
    ["task.label_noise=0.1", "seed=7", "task.L=4"],
    ["train.optimizer=sgd", "seed=8"],  # fresh count draws every step
    ["train.optimizer=sgd", "seed=9", "task.L=5"],
    ["engine.counts=mean_field", "task.L=3"],
    ["engine.counts=mean_field", "task.L=1"],
    ["train.optimizer=adam", "train.lr=0.05"],  # not batchable: runs one by one
    ["engine.kind=sampled", "engine.batch=32", "train.steps=10"],  # stackable: steps together (a group of one)
]


def test_run_many_equals_single_runs():
    cfgs = _configs(VARIANTS)
    groups, rest, _ = plan_groups(cfgs)
    assert max(len(g) for g in groups) >= 5  # several runs really share a batch
    assert len(rest) == 1
    finished = []
    many = run_many(cfgs, progress=lambda done, total: finished.append((done, total)))
    assert finished[-1] == (len(cfgs), len(cfgs))
    for cfg, batched in zip(cfgs, many, strict=True):
        _same(li.run(cfg, write=False), batched)
    statuses = {r.summary["status"] for r in many}
    assert {"converged", "budget"} <= statuses


def test_run_many_with_two_threads_equals_single_runs():
    """Reductions and matrix products split across threads must not change a run's numbers."""
    cfgs = _configs([
        ["features.kind=gaussian", "features.K=16", "features.d=16", "engine.draws=512", f"task.L={L}",
         "train.steps=15", f"seed={s}"]
        for L, s in ((1, 0), (2, 1), (4, 2))
    ])
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        many = run_many(cfgs)
        singles = [li.run(c, write=False) for c in cfgs]
    finally:
        torch.set_num_threads(old)
    for a, b in zip(singles, many, strict=True):
        _same(a, b)


def test_diverging_run_leaves_the_batch_alone():
    # with strong label noise a huge step overshoots to one-hot attention, which costs tau^2 / c_k
    cfgs = _configs([["task.label_noise=0.5"], ["task.label_noise=10", "train.lr=1e4", "train.diverge_factor=2"],
                     ["task.label_noise=1", "task.L=3"]])
    assert len(plan_groups(cfgs)[0]) == 1  # one batch
    many = run_many(cfgs)
    assert [r.summary["status"] for r in many] == ["budget", "diverged", "budget"]
    for cfg, batched in zip(cfgs, many, strict=True):
        _same(li.run(cfg, write=False), batched)


def test_device_cpu_and_auto_run_batched():
    cfgs = _configs([["engine.device=cpu"], ["engine.device=auto", "seed=1"]])
    if torch.cuda.is_available():  # pragma: no cover - no GPU on the test machines
        pytest.skip("auto would pick cuda")
    many = run_many(cfgs)
    for cfg, batched in zip(cfgs, many, strict=True):
        _same(li.run(cfg, write=False), batched)


def test_float32_stays_within_tolerance_of_float64():
    """Stated tolerance: loss within 1e-4 relative and attention within 1e-5 absolute at every
    recorded step, same number of steps (measured: ~2e-6 and ~3e-7)."""
    for extra in ([], ["task.kind=relu_net", "task.kernel_samples=256", "train.steps=300"],
                  ["features.kind=gaussian", "train.steps=300"]):
        ov = ["train.log_every=10", *extra]
        r64 = li.run("configs/quickstart.yaml", ov, write=False)
        r32 = li.run("configs/quickstart.yaml", [*ov, "engine.dtype=float32"], write=False)
        assert r32.summary["steps"] == r64.summary["steps"]
        l64, l32 = r64.series("loss"), r32.series("loss")
        assert ((l32 - l64).abs() / l64.abs()).max() <= 1e-4
        a64, a32 = r64.per_feature("attn_self"), r32.per_feature("attn_self")
        assert (a32 - a64).abs().to_numpy().max() <= 1e-5


def test_scores_are_recorded_per_step():
    """A_k = v_k^T Q v_k at each log step (the recorder must copy, not alias, the scores)."""
    run = li.run(None, SHORT, write=False)
    A = run.per_feature("A")
    assert (A.loc[0] == 0).all()  # Q^(0) = 0
    assert A.iloc[-1].abs().min() > A.iloc[1].abs().max() > 0  # scores grow along the run


def test_on_run_reports_each_run_once_as_it_stops_in_order_of_stopping():
    cfgs = _configs([["train.steps=30", "train.eps=1e-12"], ["train.steps=10", "train.eps=1e-12"],
                     ["train.steps=20", "train.eps=1e-12"]])
    seen: list[tuple[int, int]] = []
    runs = run_many(cfgs, on_run=lambda i, run: seen.append((i, run.summary["steps"])))
    assert seen == [(1, 10), (2, 20), (0, 30)]  # the moment each run stops, not at the batch's end
    for a, b in zip(runs, [li.run(c, write=False) for c in cfgs], strict=True):
        _same(a, b)


def test_ctrl_c_inside_on_run_reports_no_run_twice():
    """Ctrl-C while the caller writes a finished run: the batch ends as interrupted, and the run
    being written is not reported a second time (it was reported a second time, as interrupted,
    and run_many then failed with a KeyError)."""
    cfgs = _configs([["train.steps=10", "train.eps=1e-12"], ["train.steps=200", "train.eps=1e-12"]])
    seen: list[tuple[int, str]] = []

    def on_run(i: int, run: li.Run) -> None:
        seen.append((i, run.summary["status"]))
        if len(seen) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        run_many(cfgs, on_run=on_run)
    assert seen == [(0, "budget"), (1, "interrupted")]
    assert [r.summary["status"] for r in caught.value.runs] == ["budget", "interrupted"]


def test_runs_that_differ_only_in_their_loop_are_twins_and_equal_single_runs(monkeypatch):
    """Configs that differ only in what the training loop reads (eta, budget, epsilon, logging, the theory's
    constants) are prepared once and twinned (their count generators their own: sgd redraws every step; a twin's
    theory shared only where its constants are its twin's), and each run equals its run alone."""
    import lipschitz_icl.batch as batch_module

    loops = [[], ["train.lr=0.5"], ["train.lr=2", "train.log_every=3"], ["train.eps=0.05", "train.steps=60"],
             ["theory.c=3", "train.lr=0.5"], ["theory.c=3", "theory.band=0.9"], ["train.lr=0.7"]]
    cfgs = _configs([[*base, *loop] for base in (["train.optimizer=sgd", "seed=3"], ["task.L=4"]) for loop in loops])
    prepared = []
    monkeypatch.setattr(batch_module, "prepare", lambda cfg: prepared.append(cfg) or li.api.prepare(cfg))
    many = run_many(cfgs)
    assert len(prepared) == 2  # one per set-up: the rest are twins
    for cfg, batched in zip(cfgs, many, strict=True):
        _same(li.run(cfg, write=False), batched)


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")
def test_a_fused_run_that_ends_between_its_log_steps_has_its_numbers_alone_and_in_a_batch():
    """A run that converges between its log steps (step 115, after T_1) beside a run recording every step: its last
    record is evaluated apart in the batch too, as alone, not read from the batch's full fused step (whose sums are
    other sums: the last bits of its test error and attention differed)."""
    fused = ["engine.fused=true", "train.steps=400", "engine.draws=32"]
    dense = li.load_config("configs/quickstart.yaml", [*fused, "task.L=0.3", "train.lr=0.5", "seed=1"])
    ending = li.load_config("configs/quickstart.yaml", [*fused, "task.L=3", "train.lr=10", "train.eps=1e-3", "seed=2"])
    alone = li.run(ending, write=False)
    assert alone.summary["status"] == "converged" and alone.summary["steps"] % ending.train.log_every
    assert alone.summary["T_1"] < alone.summary["steps"] and li.run(dense, write=False).summary["T_1"] is None
    for batched, cfg in zip(run_many([dense, ending]), [dense, ending], strict=True):
        _same(li.run(cfg, write=False), batched)


def test_ctrl_c_while_a_finished_kernel_run_is_handed_over_keeps_its_end():
    """Ctrl-C as the caller takes a run that ended at its budget while another ended at the same step and a third
    steps on: the two keep their own outcome, the third ends interrupted, and each is handed over once."""
    from lipschitz_icl.api import prepare
    from lipschitz_icl.recorder import Recorder
    from lipschitz_icl.train_batch import train_batched

    cfgs = _configs([["seed=0", "train.steps=8"], ["seed=1", "train.steps=8"], ["seed=2"]])
    built = [prepare(c) for c in cfgs]
    handed = []

    def taken(i, outcome):
        handed.append((i, outcome.status))
        if len(handed) == 1:
            raise KeyboardInterrupt

    outcomes = train_batched(cfgs, [e for _, e, _ in built],
                             [Recorder(p.features.K, e.score_metrics()) for p, e, _ in built], on_finish=taken)
    assert handed == [(0, "budget"), (1, "budget"), (2, "interrupted")]  # once each
    assert [o.status for o in outcomes] == ["budget", "budget", "interrupted"]
