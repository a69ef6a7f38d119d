"""The stopping rules of a training run, shared by the single-run and the batched trainer.

A run ends when its loss reaches epsilon (``converged``; ``trivial`` when the initial loss already
is at or below it, so nothing was learned), when its step budget is spent
(``budget``), or when its loss is not finite or exceeds ``diverge_factor`` times its initial
loss (``diverged``). Ctrl-C ends it as ``interrupted`` and an error raised while training as
``failed``; every metric recorded before that is kept.

Event times come from the trainer's own step, never from the log grid: T_1 (first step with
min_k Attn_k >= analysis.t1_level), T_eps, each feature's half-time T_half[k] (first step at which
1 - Attn_k is at most half its initial value) and T_rel (first step with loss <= r * initial loss,
for r = 10^(-j/8), j = 1, 2, ...: T_eps on a grid of relative epsilons, eight per decade).
Recording: every step while T_1 is not reached, for the first ``DENSE_STEPS`` steps, and the
step T_1 itself; then every ``train.log_every`` steps, and the last. Continuous inputs (sphere, gaussian_inputs)
have no feature to attend to, hence no T_1 to resolve: they record every ``train.log_every`` steps from the start
(recording every step there cost each of the first 200 steps about 1.5 training steps of test prompts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .config import Config, TrainConfig
from .inputs import is_continuous

DENSE_STEPS = 200  # every step is recorded until T_1, for at most this many steps
REL_PER_DECADE = 8  # T_rel levels: 10^(-j / REL_PER_DECADE)
REL_MAX_J = 8 * REL_PER_DECADE  # down to a relative loss of 1e-8


def rel_level(j: int) -> float:
    """The j-th relative-loss level of T_rel, 10^(-j/8)."""
    return 10.0 ** (-j / REL_PER_DECADE)


def rel_key(level: float) -> str:
    """A T_rel level as the summary writes it (e.g. '0.000316')."""
    return f"{level:.3g}"


@dataclass
class TrainOutcome:
    status: str  # converged | trivial | budget | diverged | interrupted | failed
    steps: int  # updates done (the step at which the run ended)
    wall_s: float
    final_loss: float | None
    min_attn: float | None  # final min_k Attn_k
    T_1: int | None  # first step with min_k Attn_k >= analysis.t1_level
    T_eps: int | None  # first step with loss <= eps (eps times the initial loss when eps_mode=relative)
    T_half: list[int | None] = field(default_factory=list)  # per feature k: 1 - Attn_k halves
    T_rel: dict[str, int] = field(default_factory=dict)  # relative loss level -> first step at or below it
    test_errors: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    final_scores: torch.Tensor | None = None  # (K, K) scores at the end (batched trainer only)


def target_loss(tc: TrainConfig, loss_0: float) -> float:
    """The loss a run stops at: eps, or eps times the initial loss when eps_mode=relative."""
    return tc.eps * loss_0 if tc.eps_mode == "relative" else tc.eps


def finite_or_none(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@dataclass
class RunState:
    """What the stopping rules know about one run as it trains."""

    status: str = "budget"
    steps: int = 0
    wall_s: float = 0.0
    loss_0: float | None = None  # the initial loss (divergence and relative epsilon refer to it)
    last_loss: float | None = None
    last_attn: float | None = None  # min_k Attn_k at the last step that was not diverged
    T_1: int | None = None
    T_eps: int | None = None
    T_half: list[int | None] = field(default_factory=list)
    T_rel: dict[str, int] = field(default_factory=dict)
    gap_0: list[float] = field(default_factory=list)  # 1 - Attn_k at step 0
    next_rel: int = 1  # the next T_rel level to reach
    test_errors: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    final_scores: torch.Tensor | None = None

    def dense(self, cfg: Config, step: int) -> bool:
        """Whether ``step`` is recorded because T_1 has not been reached yet (first DENSE_STEPS steps; never on
        continuous inputs, which have no T_1)."""
        return self.T_1 is None and step < DENSE_STEPS and not is_continuous(cfg.features.kind)

    def wants_record(self, cfg: Config, step: int) -> bool:
        """Whether ``step`` is recorded whatever its loss (the batched trainer evaluates the full
        attention for it in the step itself; other recorded steps are evaluated apart)."""
        return step % cfg.train.log_every == 0 or step == cfg.train.steps or self.dense(cfg, step)

    def observe(self, cfg: Config, step: int, loss: float, attn_min: float,
                attn_self: list[float] | None = None) -> tuple[bool, bool]:
        """Apply the stopping rules to the loss, min_k Attn_k and (optionally) every Attn_k at ``step``
        (before its update), and note the event times reached. Returns (record this step, the run
        ends here)."""
        tc = cfg.train
        if self.loss_0 is None:
            self.loss_0 = max(loss, 1e-300) if math.isfinite(loss) else math.inf
        if not math.isfinite(loss) or loss > tc.diverge_factor * self.loss_0:
            self.status = "diverged"
            return False, True
        record = self.wants_record(cfg, step)
        if self.T_1 is None and attn_min >= cfg.analysis.t1_level:
            self.T_1, record = step, True
        if attn_self is not None:
            self._half_times(step, attn_self)
        self._rel_times(step, loss)
        done = loss <= target_loss(tc, self.loss_0)
        self.last_loss, self.last_attn = loss, attn_min
        if done:  # met at step 0: the target asked nothing of training, the run learned nothing
            self.status, self.T_eps = ("trivial" if step == 0 else "converged"), step
        return record or done, done or step == tc.steps

    def _half_times(self, step: int, attn_self: list[float]) -> None:
        """T_half[k]: first step with 1 - Attn_k <= (1 - Attn_k(0)) / 2."""
        if not self.gap_0:
            self.gap_0 = [1.0 - a for a in attn_self]
            self.T_half = [None] * len(attn_self)
        for k, a in enumerate(attn_self):
            if self.T_half[k] is None and 1.0 - a <= 0.5 * self.gap_0[k]:
                self.T_half[k] = step

    def _rel_times(self, step: int, loss: float) -> None:
        """T_rel: first step at or below each level r * loss_0 (levels r = 10^(-j/8), j = 1, 2, ...)."""
        while self.next_rel <= REL_MAX_J and loss <= rel_level(self.next_rel) * self.loss_0:
            self.T_rel[rel_key(rel_level(self.next_rel))] = step
            self.next_rel += 1

    def outcome(self) -> TrainOutcome:
        return TrainOutcome(
            status=self.status, steps=self.steps, wall_s=self.wall_s, final_loss=finite_or_none(self.last_loss),
            min_attn=finite_or_none(self.last_attn), T_1=self.T_1, T_eps=self.T_eps, T_half=list(self.T_half),
            T_rel=dict(self.T_rel),
            test_errors={k: v for k, v in self.test_errors.items() if math.isfinite(v)}, error=self.error,
            final_scores=self.final_scores,
        )
