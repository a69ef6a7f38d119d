"""What every engine gives the trainer and the rest of the toolkit: the interface and its hooks.

An engine evaluates the training objective of a run: ``forward_backward`` computes the loss at
the current parameters and fills their gradients. The class-level hooks let the config, the
memory check, the theory and the batched trainer ask the engine instead of branching on its
kind; see ``engines.registry`` for how an engine is registered under ``engine.kind``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import torch

from ..errors import ConfigError, UserInputError

if TYPE_CHECKING:
    from ..config import Config
    from ..problem import Problem
    from ..tasks import TaskClass

SizeCheck = tuple[str, str, int]  # (config field to name, what is held, tensor elements)
Objective = Callable[[torch.Tensor], torch.Tensor]  # Q (d x d) -> the training loss at Q
# recorded scores (T, K, K) -> scalar metrics of each record, name -> (T,): computed by the recorder
# once, when the table is made, so they cost the training loop nothing
ScoreMetrics = Callable[[np.ndarray], dict[str, np.ndarray]]


def resolve_device(name: str) -> torch.device:
    """The torch device of ``engine.device`` (auto: CUDA when available, else the CPU)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("engine.device", "cuda was asked for but no CUDA device is available (allowed: auto, cpu)")
    return torch.device(name)


DEVICE_NAMES = ("auto", "cpu", "cuda")


def device_option(name: str, option: str) -> torch.device:
    """The device of a command-line option (``--device``): like ``resolve_device``, but a bad value
    or a missing GPU is a UserInputError naming the option and what is allowed."""
    if name not in DEVICE_NAMES:
        raise UserInputError(f"{option} {name!r}: no such device (allowed: {', '.join(DEVICE_NAMES)})")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserInputError(f"{option} cuda: no CUDA device is available on this machine (allowed: auto, cpu)")
    return resolve_device(name)


@dataclass
class StepOutput:
    loss: float  # the training objective at the current parameters (before the update)
    attn: torch.Tensor  # (K, K): attn[k, n] = Attn_{k->n}; the diagonal is Attn_k
    # multi-layer/multi-head models: (n_layers, n_heads, K, K), Attn_{k->n} of every layer and
    # head (``attn`` is then the head average of the last layer); None for single-head models
    heads: torch.Tensor | None = None


class EngineBatch(Protocol):
    """R runs of one engine stacked into one tensor program (what the batched trainer drives)."""

    M: torch.Tensor  # (R, K, K) the runs' scores M[r, k, n] = v_n^T Q v_k

    def redraw(self) -> None: ...  # fresh random draws for every run that resamples

    def step(self, full: bool = False, want=None): ...  # loss, attn_self, grad (+ attn, tests of want when full)

    def evaluate(self, rows: list[int]): ...  # attention and test errors of some rows, no gradient

    def test_errors(self, rows: list[int], out): ...  # test errors of some rows after a full step

    def update(self) -> None: ...  # one optimizer step on every run

    def keep(self, rows: list[int]) -> None: ...  # drop the runs that ended


class StepBatch(Protocol):
    """Runs of one engine stepped together, each exactly as alone (``Engine.stack_steps``)."""

    def forward_backward(self, rows: list[int]) -> list[StepOutput | Exception]: ...  # each run's, or its error


class Engine:
    """Interface. ``forward_backward`` fills .grad of ``parameters()`` and returns the step output.

    Class-level hooks (override what applies; the defaults suit an engine with no extra checks,
    no large working set, and no batched trainer):
      name              the ``engine.kind`` it is registered under
      from_problem      build the engine of a run from its Problem
      check_config      refuse configs the engine cannot run (raise ConfigError naming the field)
      working_set       its largest tensors, for the memory check before a run
      batchable, stack  whether runs of a config go through the batched trainer, and the batch
      stackable, stack_steps  whether runs of a config that share a shape take their steps together (each
                        one's numbers those of ``forward_backward``), and the runs so stepped
    """

    name: ClassVar[str] = ""
    stack_runs: ClassVar[int] = 1  # runs that take their steps together at most (``stackable``)
    device: torch.device = torch.device("cpu")

    @classmethod
    def from_problem(cls, problem: Problem) -> Engine:
        raise NotImplementedError

    def twin(self) -> Engine | None:
        """Before this engine has trained: the engine ``from_problem`` would build for a config that differs from
        its own only in what the training loop reads (``kernel_spec.LOOP_ONLY``), sharing what it may; None: build
        that one anew (the default)."""
        return None

    @classmethod
    def check_config(cls, cfg: Config) -> None:
        """Raise ConfigError if this engine cannot run ``cfg``."""

    @classmethod
    def working_set(cls, cfg: Config, tasks: dict[str, TaskClass]) -> list[SizeCheck]:
        """The engine's largest tensors for ``cfg`` (``tasks``: config field -> task class of
        the training and test functions), each as (field, what, elements)."""
        return []

    @classmethod
    def batchable(cls, cfg: Config) -> bool:
        """Whether runs of ``cfg`` go through the batched trainer (``stack``): the one rule."""
        return False

    @classmethod
    def stack(cls, engines: list[Engine], lrs: list[float]) -> EngineBatch:
        """The runs of ``engines`` (equal ``batch_key``) as one batch, with step sizes eta."""
        raise NotImplementedError(f"engine {cls.name!r} has no batched trainer")

    @classmethod
    def stackable(cls, cfg: Config) -> bool:
        """Whether runs of ``cfg`` take their steps together where several share a shape (``stack_steps``, trained
        by ``train_stacked``; alone, a run trains by ``forward_backward``, with the same numbers): the one rule."""
        return False

    @classmethod
    def stack_steps(cls, engines: list[Engine]) -> StepBatch:
        """The runs of ``engines`` (equal ``batch_key``) stepped together."""
        raise NotImplementedError(f"engine {cls.name!r} takes no steps together")

    def batch_key(self) -> tuple:
        """Runs with equal keys can share a batch (or take their steps together)."""
        raise NotImplementedError(f"engine {self.name!r} has no batched trainer")

    def load_final_scores(self, scores: torch.Tensor | None) -> None:
        """Take the scores a batched run ended with (so that ``model_state`` is the trained model)."""

    def parameters(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def forward_backward(self) -> StepOutput:
        raise NotImplementedError

    def scores(self) -> torch.Tensor | None:
        """(K, K): scores[k, n] = v_n^T Q v_k, so A_k = scores[k, k] and B_{k,n} = scores[k, n].
        None for models without a single merged Q (the transformer)."""
        raise NotImplementedError

    def model_state(self) -> dict[str, torch.Tensor]:
        """The trained parameters as a state dict of the run's model (saved as params.pt)."""
        raise NotImplementedError

    def test_errors(self) -> dict[str, float]:
        """Prediction error 1/2 E[(y_hat - f(x_q))^2] on functions never used in training."""
        raise NotImplementedError

    def geometry(self) -> dict[str, float]:
        """Scalar metrics of the model at a logged step, recorded beside the test errors (the sampled
        engine: ``geometry.GEOMETRY_METRICS`` on its evaluation prompts when ``eval.geometry``)."""
        return {}

    def score_metrics(self) -> ScoreMetrics | None:
        """Metrics the recorder derives from the recorded scores when it makes the table (the kernel
        engine's geometry metrics when ``eval.geometry``), or None."""
        return None

    def objective_in_q(self) -> Objective:
        """The objective this engine trains, as a float64 function of a merged Q (d x d) on
        ``self.device``, for the theory (the Hessian at Q^(0), eta_max)."""
        raise NotImplementedError(f"engine {self.name!r} gives the theory no objective in Q")
