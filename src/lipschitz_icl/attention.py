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
from .engines.prompts import draw_prompts
from .errors import UserInputError
from .evaluate import load_model
from .features import make_features
from .problem import dtype_of
from .rng import make_generator
from .tasks import make_task

STREAM = "attention_map"  # the random stream of the drawn prompts (never shifts a run's own streams)
MAX_PROMPT_INDEX = 100_000
COLUMNS = ["layer", "head", "token", "feature", "label", "attention", "query_feature"]


PROMPT_KEYS = ("x", "x_q", "y", "y_q", "ids", "query_feature")


def _numbers(prompt: Mapping[str, Any], key: str, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``prompt[key]`` as finite float64 numbers of ``shape`` (-1: any length), or a UserInputError naming it."""
    try:
        values = np.asarray(prompt[key], dtype=np.float64)
    except (TypeError, ValueError):
        raise UserInputError(f"prompt.{key}: must be {what} of real numbers (got "
                             f"{type(prompt[key]).__name__})") from None
    if values.ndim != len(shape) or any(s not in (-1, n) for s, n in zip(shape, values.shape, strict=False)):
        raise UserInputError(f"prompt.{key}: must be {what} (got shape {values.shape})")
    if not np.isfinite(values).all():
        raise UserInputError(f"prompt.{key}: holds NaN or infinite values (allowed: finite numbers)")
    return values


def _feature_ids(prompt: Mapping[str, Any], key: str, shape: tuple[int, ...], K: int) -> np.ndarray:
    """``prompt[key]`` as whole feature ids in 0..K-1 (integers or whole floats), or a UserInputError naming it."""
    value = prompt[key]
    if isinstance(value, bool) or (isinstance(value, np.ndarray) and value.dtype == bool):
        raise UserInputError(f"prompt.{key}: feature ids are integers in 0..{K - 1} (got booleans)")
    what = "an integer" if not shape else f"{shape[0]} integers (one per context token)"
    ids = _numbers(prompt, key, shape, what)
    if not (ids == np.floor(ids)).all() or ids.min(initial=0) < 0 or ids.max(initial=0) > K - 1:
        bad = ids[(ids != np.floor(ids)) | (ids < 0) | (ids > K - 1)].reshape(-1)[0]
        raise UserInputError(f"prompt.{key}: feature ids are integers in 0..{K - 1} (got {bad:g})")
    return ids.astype(np.int64)


def _given_prompt(prompt: Mapping[str, Any], V: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """(ids (1, N+1), x (1, N+1, d), y (1, N+1)) from a mapping with x (N, d), x_q (d,), optional y (N,),
    y_q, ids (N,) and query_feature (the ids default to each token's nearest feature). Every value is
    checked: finite numbers of the right shape, ids whole and in 0..K-1, no other keys."""
    unknown = [k for k in prompt if k not in PROMPT_KEYS]
    missing = [k for k in ("x", "x_q") if k not in prompt]
    if unknown or missing:
        what = f"unknown key {unknown[0]!r}" if unknown else f"needs {', '.join(missing)}"
        raise UserInputError(f"prompt: {what} (allowed keys: {', '.join(PROMPT_KEYS)}; x and x_q required)")
    d, K = V.shape
    x = _numbers(prompt, "x", (-1, d), f"an (N, {d}) array")
    N = len(x)
    if N == 0:
        raise UserInputError("prompt.x: needs at least one context token (got none)")
    x_q = torch.as_tensor(_numbers(prompt, "x_q", (d,), f"a vector of {d}"), dtype=dtype)
    y = _numbers(prompt, "y", (N,), f"{N} labels (one per context token)") if "y" in prompt else np.zeros(N)
    if "y_q" in prompt:
        _numbers(prompt, "y_q", (), "one number")
    tokens = torch.cat([torch.as_tensor(x, dtype=dtype), x_q.unsqueeze(0)])
    nearest = torch.cdist(tokens, V.T.to(dtype)).argmin(dim=1)  # the feature closest to each token
    ids = torch.as_tensor(_feature_ids(prompt, "ids", (N,), K)) if "ids" in prompt else nearest[:-1]
    q_id = int(_feature_ids(prompt, "query_feature", (), K)) if "query_feature" in prompt else int(nearest[-1])
    all_ids = torch.cat([ids.long(), torch.tensor([q_id])]).unsqueeze(0)
    y_all = torch.cat([torch.as_tensor(y, dtype=dtype), torch.zeros(1, dtype=dtype)])
    return all_ids, tokens.unsqueeze(0), y_all.unsqueeze(0)


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
            the query ``x_q`` (d,), and optionally the labels ``y`` (N,), the query's label ``y_q``, the
            feature ids ``ids`` (N,) and ``query_feature`` (by default the feature nearest to each token).
            A given prompt with other keys, NaN or infinite numbers, or ids that are not whole numbers in
            0..K-1 is refused (UserInputError, a ValueError naming the key).

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
