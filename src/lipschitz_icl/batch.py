"""Many runs at once: ``run_many(configs)`` trains compatible kernel-engine runs as one tensor
program, steps small sampled-engine runs of one shape together, and trains the rest one after another.

    >>> import lipschitz_icl as li
    >>> from lipschitz_icl.batch import run_many
    >>> cfgs = [li.load_config("configs/quickstart.yaml", [f"task.L={L}", f"seed={s}"])
    ...         for L in (0.5, 1, 2) for s in (0, 1)]
    >>> runs = run_many(cfgs)            # list of li.Run, in the order of cfgs; nothing written

Runs are batched when their engine says so (``Engine.batchable``, the one rule that
``train.train`` asks too: for the kernel engine, S space with ``gd`` or ``sgd``) and they share
the engine's ``batch_key`` (kernel: K, the number of count draws B, dtype, device, count
redrawing, whether label noise is on, whether G = V^T V is the identity, and their test sets);
they may differ in L, task class, eta, seed, p_k, N, tau, epsilon, budget and logging. Each
run's metrics equal, bit for bit, those of ``api.run(cfg, write=False)``: the single-run
trainer is this batched trainer with one run, and every number of a run is computed from that
run's slices only (see ``engines.kernel_grad``). Summaries are equal too, except ``wall_s``
(time from the start of the batch to the end of that run).

Small sampled-engine runs of one shape (``Engine.stackable``: the single-matrix models, at most
``sampled_batch.STACK_TOKENS`` tokens a step) take their steps together instead (``train_stacked``): their
functions evaluated and their loss differentiated in one call, everything else per run, with the numbers, bit
for bit, of each run trained alone by ``train.train``.

Threads: every run, batched or trained alone, takes the caller's torch threads (a run's float
reductions depend on their number), never ``LIPSCHITZ_ICL_THREADS`` read again per run: reproduce and
sweeps call it single-threaded, so their numbers do not depend on the environment of a session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import torch

from .api import Run, make_summary, prepare
from .api import run as run_one
from .config import Config, validate_config
from .engines import Engine, batchable, stackable
from .engines.kernel_spec import LOOP_ONLY
from .interrupts import interrupt_latch
from .numba_support import numba_installed
from .problem import Problem
from .recorder import Recorder
from .stopping import TrainOutcome
from .theory import Theory, theory_of
from .train_batch import StepFn, train_batched
from .train_stacked import train_stacked

BatchProgressFn = Callable[[int, int], None]  # (runs finished, runs in all)
RunFn = Callable[[int, Run], None]  # (index of the config, its Run), the moment the run stops
# a fused run that takes every compiled entry point: records at steps 0 and 4 only (T_1 met at step 0), quiet between
TINY_FUSED = {"engine": {"fused": True, "draws": 2}, "features": {"K": 2, "d": 2}, "prompt": {"N": 4},
              "train": {"steps": 4, "log_every": 4}, "analysis": {"t1_level": 0.01}, "eval": {"functions": 2}}



class RunsInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped ``run_many``: ``runs`` holds, in the order of the configs, the runs
    that ended (the interrupted ones with status ``interrupted``) and None for those never started."""

    def __init__(self, runs: list[Run | None]) -> None:
        super().__init__("interrupted")
        self.runs = runs


def plan_groups(configs: list[Config]) -> tuple[list[list[int]], list[int], dict]:
    """Split config indices into groups that can share a batch (or take their steps together: ``stackable``) and
    the rest (run one by one); also returns the (problem, engine, theory) built for each config of a group."""
    built, groups, together, rest = {}, {}, [], []
    for i, cfg in enumerate(configs):
        (together if batchable(cfg) or stackable(cfg) else rest).append(i)
    # built in the order of what they share: configs that differ only in their training loop (a sweep's step
    # sizes) one after another, the first prepared, the rest its twins (``_twin_of``)
    shared = {i: configs[i].model_dump_json(exclude=LOOP_ONLY) for i in together}
    previous = None
    for i in sorted(together, key=shared.__getitem__):
        twin = _twin_of(configs[i], built[previous]) if previous is not None and shared[previous] == shared[i] else None
        built[i] = prepare(configs[i]) if twin is None else twin
        previous = i
    for i in together:
        engine = built[i][1]
        groups.setdefault((engine.name, engine.batch_key()), []).append(i)
    cut = []  # runs that step together: at most ``stack_runs`` a group (the stacked tensors stay in the cache)
    for members in groups.values():
        engine = built[members[0]][1]
        size = len(members) if engine.batchable(configs[members[0]]) else max(1, engine.stack_runs)
        cut.extend(members[j:j + size] for j in range(0, len(members), size))
    return cut, rest, built


def _twin_of(cfg: Config, built: tuple[Problem, Engine, Theory]) -> tuple[Problem, Engine, Theory] | None:
    """What ``prepare(cfg)`` gives, from the untrained ``built`` of a config that differs from ``cfg`` only in what
    the training loop reads (``LOOP_ONLY``): its problem (features, task, Sigma) shared, its engine's twin
    (``Engine.twin``), its theory shared too unless its ``theory`` section (loop-only) differs. None where the
    engine has no twin, or the features come from a file (read again for each run)."""
    problem, engine, theory = built
    twin = engine.twin() if cfg.features.kind != "file" else None
    if twin is None:
        return None
    torch.default_generator.manual_seed(cfg.seed)  # as ``prepare``
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(cfg.seed)
    same_theory = problem.config.theory == cfg.theory  # the rest theory_of reads is not loop-only: shared
    problem = dataclasses.replace(problem, config=cfg)
    return problem, twin, theory if same_theory else theory_of(problem)


def run_many(configs: list[Config], progress: BatchProgressFn | None = None, on_run: RunFn | None = None,
             on_step: StepFn | None = None, hashes: list[str] | None = None) -> list[Run]:
    """Train every config (write=False semantics: nothing is written; the caller writes); ``hashes``: their
    ``config_hash()``, where the caller has them already (a sweep's points), for the summaries of batched runs.

    Returns one Run per config, in order. ``progress(finished, total)`` is called as runs end, and
    ``on_run(i, run)`` with each finished Run the moment it stops (converged, budget, diverged),
    before the rest of its batch goes on: a caller can write and index it at once; ``on_step()`` after every
    step of a batch and after every run trained alone.
    A trainer records Ctrl-C as status ``interrupted``; run_many then stops, raising
    ``RunsInterrupted`` (a KeyboardInterrupt) with the runs so far, instead of training the rest.
    """
    total = len(configs)
    runs: list[Run | None] = [None] * total

    def done(i: int, run: Run) -> None:
        runs[i] = run
        if on_run is not None:
            on_run(i, run)
        if progress is not None:
            progress(sum(r is not None for r in runs), total)

    with interrupt_latch() as check_interrupt:  # a Ctrl-C that some library swallowed stops us too
        groups, rest, built = plan_groups(configs)
        for group in groups:
            _stop_if_interrupted(runs, [], check_interrupt)
            _train_group(configs, group, built, runs, done, on_step, hashes)
            _stop_if_interrupted(runs, group, check_interrupt)
        for i in rest:
            _stop_if_interrupted(runs, [], check_interrupt)
            done(i, run_one(configs[i], write=False, threads=torch.get_num_threads()))
            if on_step is not None:
                on_step()
            _stop_if_interrupted(runs, [i], check_interrupt)
    return runs  # type: ignore[return-value]


def _train_group(configs: list[Config], group: list[int], built: dict, runs: list[Run | None],
                 done: Callable[[int, Run], None], on_step: StepFn | None = None,
                 hashes: list[str] | None = None) -> None:
    """Train ``group`` (indices into ``configs``) as one batch, with ``done(i, run)`` as each run stops."""
    recorders = [Recorder(built[i][0].features.K, built[i][1].score_metrics()) for i in group]

    def finished(pos: int, outcome: TrainOutcome) -> None:
        i = group[pos]
        if runs[i] is not None:  # reported already (Ctrl-C while the caller wrote it: the batch ends again)
            return
        problem, engine, theory = built.pop(i)
        engine.load_final_scores(outcome.final_scores)  # so that model_state() is the trained Q
        summary = make_summary(configs[i], problem, theory, outcome, None if hashes is None else hashes[i])
        done(i, Run(configs[i], summary,
                    recorders[pos], params=engine.model_state()))

    engines = [built[i][1] for i in group]
    trainer = train_batched if engines[0].batchable(configs[group[0]]) else train_stacked
    trainer([configs[i] for i in group], engines, recorders, on_finish=finished, on_step=on_step)


def _stop_if_interrupted(runs: list[Run | None], indices: list[int], check_interrupt: Callable[[], None]) -> None:
    """RunsInterrupted when a run in ``indices`` was interrupted or an interrupt is pending."""
    try:
        check_interrupt()
    except KeyboardInterrupt:
        raise RunsInterrupted(runs) from None
    if any(runs[i] is not None and runs[i].summary.get("status") == "interrupted" for i in indices):
        raise RunsInterrupted(runs)


def warm_fused_step(dtypes: Iterable[str] = ("float64",)) -> None:
    """Load the compiled fused kernel step and stopping rules (``engine.fused``; numba loads them from its on-disk
    cache, about 0.4 CPU-s in each process) into this process, for each ``engine.dtype`` in ``dtypes``, by training
    a tiny fused run: processes forked from this one (a sweep's batches, reproduce's experiments) then start with
    them instead of each loading them again. Nothing is written; torch's default generator is left as it was;
    without numba, nothing is done."""
    dtypes = sorted(set(dtypes))
    if not dtypes or not numba_installed():
        return
    state = torch.get_rng_state()
    try:
        for dtype in dtypes:
            run_many([validate_config({**TINY_FUSED, "engine": {**TINY_FUSED["engine"], "dtype": dtype}})])
    finally:
        torch.set_rng_state(state)
