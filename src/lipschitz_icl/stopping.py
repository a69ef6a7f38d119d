"""The stopping rules of a training run, shared by the single-run and the batched trainer.

A run ends when its loss reaches epsilon (``converged``; ``trivial`` when the initial loss already
is at or below it, so nothing was learned), when its step budget is spent
(``budget``), or when its loss is not finite or exceeds ``diverge_factor`` times its initial
loss (``diverged``). Ctrl-C ends it as ``interrupted`` and an error raised while training as
``failed``; every metric recorded before that is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .config import Config, TrainConfig


@dataclass
class TrainOutcome:
    status: str  # converged | trivial | budget | diverged | interrupted | failed
    steps: int  # updates done (the step at which the run ended)
    wall_s: float
    final_loss: float | None
    min_attn: float | None  # final min_k Attn_k
    T_1: int | None  # first step with min_k Attn_k >= analysis.t1_level
    T_eps: int | None  # first step with loss <= eps (eps times the initial loss when eps_mode=relative)
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
    test_errors: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    final_scores: torch.Tensor | None = None

    def observe(self, cfg: Config, step: int, loss: float, attn_min: float) -> tuple[bool, bool]:
        """Apply the stopping rules to the loss and min_k Attn_k at ``step`` (before its update).
        Returns (record this step, the run ends here)."""
        tc = cfg.train
        if self.loss_0 is None:
            self.loss_0 = max(loss, 1e-300) if math.isfinite(loss) else math.inf
        if not math.isfinite(loss) or loss > tc.diverge_factor * self.loss_0:
            self.status = "diverged"
            return False, True
        if self.T_1 is None and attn_min >= cfg.analysis.t1_level:
            self.T_1 = step
        done = loss <= target_loss(tc, self.loss_0)
        self.last_loss, self.last_attn = loss, attn_min
        record = step % tc.log_every == 0 or done or step == tc.steps
        if done:  # met at step 0: the target asked nothing of training, the run learned nothing
            self.status, self.T_eps = ("trivial" if step == 0 else "converged"), step
        return record, done or step == tc.steps

    def outcome(self) -> TrainOutcome:
        return TrainOutcome(
            status=self.status, steps=self.steps, wall_s=self.wall_s, final_loss=finite_or_none(self.last_loss),
            min_attn=finite_or_none(self.last_attn), T_1=self.T_1, T_eps=self.T_eps,
            test_errors={k: v for k, v in self.test_errors.items() if math.isfinite(v)}, error=self.error,
            final_scores=self.final_scores,
        )
