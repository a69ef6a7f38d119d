"""What every engine gives the trainer: parameters, one forward+backward, metrics and tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """The torch device of ``engine.device`` (auto: CUDA when available, else the CPU)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("engine.device", "cuda was asked for but no CUDA device is available (allowed: auto, cpu)")
    return torch.device(name)


@dataclass
class StepOutput:
    loss: float  # the training objective at the current parameters (before the update)
    attn: torch.Tensor  # (K, K): attn[k, n] = Attn_{k->n}; the diagonal is Attn_k
    # multi-layer/multi-head models: (n_layers, n_heads, K, K), Attn_{k->n} of every layer and
    # head (``attn`` is then the head average of the last layer); None for single-head models
    heads: torch.Tensor | None = None


class Engine:
    """Interface. ``forward_backward`` fills .grad of ``parameters()`` and returns the step output."""

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
