"""The residual-stream form: linear self-attention on tokens z = [x; y] (columns of Z, (D+1) x (N+1)).

One layer with heads h maps Z to Z + sum_h W^PV_h Z M Z^T W^KQ_h Z / N, M = diag(1, ..., 1, 0) (the query
token [x_q; 0] is not attended to); the prediction is read from the query token's last entry. ``embed`` places
a reduced form's parameters into these matrices, with every block the papers' initialisations hold at zero set
to zero:
- merged: W^PV_h = v_h e_y e_y^T, W^KQ_h = [[W_h, 0], [0, 0]];  separate: W^KQ_h = [[K_h^T Q_h, 0], [0, 0]];
- full: the layer itself, W^PV_h and W^KQ_h ((D+1) x (D+1) each) all free (sampled engine only; from
  Zhang-Frei-Bartlett's initialisation, where only the blocks above are non-zero, the others stay zero);
- gd_layers (Ahn et al.): W^PV = e_y e_y^T, W^KQ_l = [[-A_l^T, 0], [0, 0]], and yh = -(the query's last entry):
  the label entries then hold the residuals y_n - x_n^T w_l and the query's entry -x_q^T w_l.
``token_predict`` of an embedded form equals ``forms.predict`` (tests/test_linattn.py): the reduced forms
are what the layer computes, not a model of it."""

from __future__ import annotations

import torch

from .forms import Form, Params


def tokens(x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """Z (B, D+1, N+1): context columns [x_n; y_n], then the query column [x_q; 0]."""
    ctx = torch.cat([x, y[..., None]], dim=-1)  # (B, N, D+1)
    query = torch.cat([xq, torch.zeros_like(xq[:, :1])], dim=-1)[:, None]  # (B, 1, D+1)
    return torch.cat([ctx, query], dim=1).transpose(1, 2)


def layer(z: torch.Tensor, heads: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """One linear self-attention layer with residual: Z + sum_h W^PV_h Z M Z^T W^KQ_h Z / N."""
    n = z.shape[-1] - 1
    ctx = z[..., :n]
    out = z
    for pv, kq in heads:
        out = out + pv @ (ctx @ ctx.transpose(1, 2)) @ kq @ z / n
    return out


def _block(top_left: torch.Tensor) -> torch.Tensor:
    d = top_left.shape[-1]
    out = torch.zeros(d + 1, d + 1, dtype=top_left.dtype)
    out[:d, :d] = top_left
    return out


def _value(scale: torch.Tensor, d: int) -> torch.Tensor:
    out = torch.zeros(d + 1, d + 1, dtype=scale.dtype)
    out[d, d] = scale
    return out


def embed(form: Form, params: Params) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """The layers (each a list of heads (W^PV, W^KQ)) that compute ``form`` with ``params``."""
    if form.kind == "gd_layers":
        d = params["A"].shape[-1]
        return [[(_value(torch.tensor(1.0, dtype=a.dtype), d), _block(-a.T))] for a in params["A"]]
    if form.kind == "gamma":
        d = params["Gamma"].shape[-1]
        return [[(_value(torch.tensor(1.0, dtype=params["Gamma"].dtype), d), _block(params["Gamma"].T))]]
    if form.kind == "full":
        return [[(pv, kq) for pv, kq in zip(params["PV"], params["KQ"], strict=True)]]
    d = (params["W"] if form.kind == "merged" else params["K"]).shape[-1]
    kq = params["W"] if form.kind == "merged" else torch.einsum("hri,hrj->hij", params["K"], params["Q"])
    return [[(_value(v, d), _block(m)) for v, m in zip(params["v"], kq, strict=True)]]


def token_predict(form: Form, params: Params, x: torch.Tensor, y: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """yh read from the query token after the embedded layers."""
    z = tokens(x, y, xq)
    for heads in embed(form, params):
        z = layer(z, heads)
    sign = -1.0 if form.kind == "gd_layers" else 1.0
    return sign * z[:, -1, -1]
