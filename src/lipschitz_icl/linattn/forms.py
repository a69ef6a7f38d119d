"""The linear-attention models these papers train, as parameter sets and the predictor they compute.

Every single-layer form predicts y_q by yh = x_q^T Gamma h, with h = (1/N) sum_n y_n x_n and Gamma a product of
its parameters (what one layer of linear attention computes on the token [x; y] once the blocks that the papers'
initialisations hold at zero are zero: ``tokens.py`` checks it against the residual-stream layer):

- ``merged`` (Zhang et al.'s ATTN_M; Zhang-Frei-Bartlett): H heads, a value scalar v_h and a merged key-query
  matrix W_h (D x D); Gamma = sum_h v_h W_h^T.
- ``separate`` (ATTN_S): H heads of rank R, value v_h, keys K_h and queries Q_h (R x D); Gamma = sum_h v_h Q_h^T K_h.
- ``gd_layers`` (Ahn et al.): L layers, each one step of preconditioned gradient descent on the context,
  w_{l+1} = w_l + A_l (1/N) sum_n x_n (y_n - x_n^T w_l) from w_0 = 0, and yh = x_q^T w_L; with one layer,
  Gamma = A_0.
- ``gamma``: Gamma itself, one matrix (the least-squares view, Lu et al.);
- ``full``: the residual-stream layer with every block of W^PV_h and W^KQ_h free (``tokens.py``; the sampled
  engine only: its population loss needs moments of order six)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..contract import einsum
from ..errors import UserInputError
from .task import DTYPE, check_count

FORMS = ("merged", "separate", "gd_layers", "gamma", "full")


@dataclass(frozen=True)
class Form:
    """A model: ``kind`` (one of FORMS), ``heads`` H, ``rank`` R (separate), ``layers`` L (gd_layers)."""

    kind: str = "merged"
    heads: int = 1  # H
    rank: int = 1  # R, separate heads only
    layers: int = 1  # L, gd_layers only

    def __post_init__(self) -> None:
        if self.kind not in FORMS:
            raise UserInputError(f"form {self.kind!r}: no such linear-attention form (allowed: {', '.join(FORMS)})")
        for name in ("heads", "rank", "layers"):
            check_count(name, getattr(self, name))

    def shapes(self, dim: int) -> dict[str, tuple[int, ...]]:
        """Parameter name -> shape, for inputs in R^dim."""
        h, r, d = self.heads, self.rank, dim
        return {"merged": {"v": (h,), "W": (h, d, d)},
                "separate": {"v": (h,), "K": (h, r, d), "Q": (h, r, d)},
                "gd_layers": {"A": (self.layers, d, d)},
                "gamma": {"Gamma": (d, d)},
                "full": {"PV": (h, d + 1, d + 1), "KQ": (h, d + 1, d + 1)}}[self.kind]

    @property
    def single_layer(self) -> bool:
        """Whether the model is yh = x_q^T Gamma h for one Gamma (not full, nor gd_layers with L > 1)."""
        return self.kind != "full" and (self.kind != "gd_layers" or self.layers == 1)


Params = dict[str, torch.Tensor]


def init_params(form: Form, dim: int, scale: float, gen: torch.Generator) -> Params:
    """Small random initialisation: every entry N(0, scale^2) (Zhang et al.'s small initialisation);
    scale 0 gives zeros (gd_layers, gamma: gradient descent from zero)."""
    return {name: scale * torch.randn(shape, generator=gen, dtype=DTYPE) if scale else torch.zeros(shape, dtype=DTYPE)
            for name, shape in form.shapes(dim).items()}


def given_params(form: Form, dim: int, values: Params) -> Params:
    """A given initialisation, checked against the form's shapes (a UserInputError names what is wrong)."""
    shapes = form.shapes(dim)
    if set(values) != set(shapes):
        raise UserInputError(f"initial parameters of a {form.kind} form: expected {sorted(shapes)} "
                             f"(got {sorted(values)})")
    out = {}
    for name, shape in shapes.items():
        t = torch.as_tensor(values[name], dtype=DTYPE).clone()
        if tuple(t.shape) != shape:
            raise UserInputError(f"initial {name}: expected shape {shape} (got {tuple(t.shape)})")
        out[name] = t
    return out


def gamma_of(form: Form, params: Params) -> torch.Tensor:
    """Gamma (D x D) of a single-layer form: yh = x_q^T Gamma h (parameters as torch tensors, or as NumPy arrays
    for fast.py's descent: the result is of the same kind)."""
    contract = np.einsum if isinstance(next(iter(params.values())), np.ndarray) else einsum
    if form.kind == "merged":
        return contract("h,hij->ji", params["v"], params["W"])  # sum_h v_h W_h^T
    if form.kind == "separate":
        return contract("h,hri,hrj->ij", params["v"], params["Q"], params["K"])  # sum_h v_h Q_h^T K_h
    if form.kind == "gamma":
        return params["Gamma"]
    if not form.single_layer:
        raise ValueError(f"gamma_of: a {form.kind} form with these sizes has no single Gamma")
    return params["A"][0]


def gamma_predict(gamma: torch.Tensor, x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """yh = x_q^T Gamma h, h = (1/N) sum_n y_n x_n, for contexts x (B, N, D), labels y (B, N), queries xq (B, D)."""
    h = torch.einsum("bn,bnd->bd", y, x) / x.shape[1]
    return einsum("bi,ij,bj->b", xq, gamma, h)


def predict(form: Form, params: Params, x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """yh for a batch of prompts: contexts x (B, N, D), labels y (B, N), queries xq (B, D)."""
    n = x.shape[1]
    if form.kind == "full":
        raise ValueError("predict: the full form's prediction is tokens.token_predict")
    if form.single_layer:
        return gamma_predict(gamma_of(form, params), x, y, xq)
    w = torch.zeros_like(xq)
    for a in params["A"]:  # one preconditioned GD step per layer
        resid = y - torch.einsum("bnd,bd->bn", x, w)
        w = w + torch.einsum("ij,bj->bi", a, torch.einsum("bn,bnd->bd", resid, x) / n)
    return (xq * w).sum(-1)

