"""One prompt's attention: where the trained model's query looks among the context tokens.

    >>> import lipschitz_icl as li
    >>> table = li.attention_map(run, prompt=0)   # one row per (layer, head, context token)
    >>> table.groupby("feature")["attention"].sum()   # attention mass by the tokens' feature

Works for every model (``reduced``, ``factored``, ``linear_attention``, every layer and head of a
``transformer``) and for runs of either engine: a kernel-engine run never saw a prompt, so one is drawn
from its setting (its features, token noise, task class and label noise), as the sampled engine
draws them. Aggregated over many prompts and queries this is the recorded Attn_k (``Run.attention``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .api import Run, load_run
from .engines.sampled import draw_prompts
from .errors import UserInputError
from .evaluate import load_model
from .features import make_features
from .problem import dtype_of
from .rng import make_generator
from .tasks import make_task

STREAM = "attention_map"  # the random stream of the drawn prompts (never shifts a run's own streams)
MAX_PROMPT_INDEX = 100_000
COLUMNS = ["layer", "head", "token", "feature", "label", "attention", "query_feature"]


def _given_prompt(prompt: Mapping[str, Any], V: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """(ids (1, N+1), x (1, N+1, d), y (1, N+1)) from a mapping with x (N, d), x_q (d,), optional y (N,),
    ids (N,) and query_feature (the ids default to each token's nearest feature)."""
    missing = [k for k in ("x", "x_q") if k not in prompt]
    if missing:
        raise UserInputError(f"prompt: needs {', '.join(missing)} (allowed keys: x, x_q, y, ids, query_feature)")
    x = torch.as_tensor(np.asarray(prompt["x"], dtype=np.float64), dtype=dtype)
    x_q = torch.as_tensor(np.asarray(prompt["x_q"], dtype=np.float64), dtype=dtype)
    d = V.shape[0]
    if x.ndim != 2 or x.shape[1] != d or x_q.shape != (d,):
        raise UserInputError(f"prompt: x must be (N, {d}) and x_q ({d},) (got {tuple(x.shape)} and {tuple(x_q.shape)})")
    tokens = torch.cat([x, x_q.unsqueeze(0)])
    nearest = torch.cdist(tokens, V.T.to(dtype)).argmin(dim=1)  # the feature closest to each token
    ids = torch.as_tensor(prompt["ids"]) if "ids" in prompt else nearest[:-1]
    q_id = int(prompt.get("query_feature", nearest[-1]))
    y = torch.as_tensor(np.asarray(prompt.get("y", np.zeros(len(x))), dtype=np.float64), dtype=dtype)
    if ids.shape != (len(x),) or y.shape != (len(x),):
        raise UserInputError(f"prompt: ids and y must hold one value per context token ({len(x)})")
    all_ids = torch.cat([ids.long(), torch.tensor([q_id])]).unsqueeze(0)
    return all_ids, tokens.unsqueeze(0), torch.cat([y, torch.zeros(1, dtype=dtype)]).unsqueeze(0)


def _drawn_prompt(run: Run, index: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Prompt ``index`` of the run's setting, from the stream ``attention_map`` of its seed."""
    if not 0 <= index <= MAX_PROMPT_INDEX:
        raise UserInputError(f"prompt: the index must be in 0..{MAX_PROMPT_INDEX} (got {index})")
    cfg = run.config
    fs = make_features(cfg.features, make_generator(cfg.seed, "features"))
    task = make_task(cfg.task.kind, cfg.task.L, cfg.features.d, cfg.task.params)
    batch = draw_prompts(fs, task, cfg.prompt.N, index + 1, cfg.task.label_noise, make_generator(cfg.seed, STREAM))
    return batch.ids[index:index + 1], batch.x[index:index + 1].to(dtype), batch.y[index:index + 1].to(dtype)


def attention_map(run: Run | str | Path, prompt: int | Mapping[str, Any] = 0) -> pd.DataFrame:
    """The query's attention over the context tokens of one prompt, as a tidy table.

    Args:
        run: a Run (``li.run``, ``li.load_run``; in memory or written) or a run directory.
        prompt: an index (default 0): prompt number ``prompt`` drawn from the run's setting (the same
            index always gives the same prompt); or a mapping with the context tokens ``x`` (N x d),
            the query ``x_q`` (d,), and optionally the labels ``y`` (N,), the feature ids ``ids`` (N,)
            and ``query_feature`` (by default the feature nearest to each token).

    Returns:
        pandas.DataFrame: one row per layer, head and context token, with the columns ``layer``,
            ``head`` (0 for single-head models), ``token`` (the context position, 0-based), ``feature``
            (its feature id z_i), ``label`` (y_i), ``attention`` (softmax_i of the query's scores; for
            ``linear_attention`` the weight x_i^T Gamma x_q / n, which need not be positive) and
            ``query_feature``. Its ``attrs`` hold ``y_hat`` (the model's prediction) and ``target``
            (f(x_q), or None for a given prompt without it)."""
    run = run if isinstance(run, Run) else load_run(run)
    if run.params is None and run.dir is None:
        raise UserInputError("the run has no trained parameters (params.pt or run.params)")
    model = load_model(run)
    dtype = dtype_of(run.config)
    V = make_features(run.config.features, make_generator(run.config.seed, "features")).V
    given = isinstance(prompt, Mapping)
    if not given and (isinstance(prompt, bool) or not isinstance(prompt, int | np.integer)):
        raise UserInputError(f"prompt: an index or a mapping with x and x_q (got {type(prompt).__name__})")
    ids, x, y = _given_prompt(prompt, V, dtype) if given else _drawn_prompt(run, int(prompt), dtype)
    with torch.no_grad():
        y_hat, attn = model(x[:, :-1], y[:, :-1], x[:, -1])
    weights = attn.reshape(1, -1, attn.shape[-1])[0].double().numpy()  # (layers x heads, N)
    heads = attn.shape[2] if attn.ndim == 4 else 1
    N = weights.shape[1]
    frame = pd.DataFrame({
        "layer": np.repeat(np.arange(weights.shape[0]) // heads, N),
        "head": np.repeat(np.arange(weights.shape[0]) % heads, N),
        "token": np.tile(np.arange(N), weights.shape[0]),
        "feature": np.tile(ids[0, :-1].numpy(), weights.shape[0]),
        "label": np.tile(y[0, :-1].double().numpy(), weights.shape[0]),
        "attention": weights.reshape(-1),
        "query_feature": int(ids[0, -1]),
    }, columns=COLUMNS)
    frame.attrs = {"y_hat": float(y_hat[0]), "target": None if given and "y_q" not in prompt else
                   float(prompt["y_q"]) if given else float(y[0, -1]), "model": run.config.model.kind}
    return frame
