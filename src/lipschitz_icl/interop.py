"""Export a trained ``transformer`` run to TransformerLens, the standard library for mechanistic interpretability
on PyTorch (hooks on every activation, ``run_with_cache``, activation patching, attribution):

    >>> from lipschitz_icl.interop import to_transformer_lens
    >>> lens = to_transformer_lens("runs/my-transformer")        # a Run or a run directory
    >>> y_hat, cache = lens.run_with_cache(x_ctx, y_ctx, x_q)    # the toolkit's own inputs
    >>> cache["blocks.0.attn.hook_pattern"]                       # (B, n_heads, N+1, N+1)
    >>> lens.bridge                                               # the TransformerLens model itself

TransformerLens 4 removed ``HookedTransformer``; a model built from a config rather than from a Hugging Face
checkpoint is now ``TransformerBridge.boot_native(TransformerBridgeConfig)``, which this module builds (the
same config fields and hook names as HookedTransformer's). The mapping of ``transformer.ICLTransformer``:

    toolkit                                  TransformerLens (boot_native)
    embed: [x, y] -> W x + b (linear)        embed.weight (d+2, W): rows W^T then b; inputs_embeds = [x, y, 1] W_E
    no positional encoding                   positional_embedding_type standard, pos_embed.weight = 0
    keys/values: the N context tokens        attention_dir bidirectional, attention_mask 1 on context, 0 on the query
    W_Q, W_K, W_V, W_O (no bias)             blocks.l.attn.{q,k,v,o}.weight, biases 0; scores / sqrt(d_head)
    pre-LN (layernorm), GELU MLP W -> 4W     normalization_type LN (or None), ln1/ln2, mlp.in/out, act_fn gelu
    readout of the query position            ln_final, unembed (d_vocab_out 1, with its bias); y_hat = logits[:, -1, 0]

TransformerLens takes token ids or embeddings, not the toolkit's continuous tokens, so the linear embedding is
applied here (``inputs``) and the residual stream enters the model as ``inputs_embeds``; its weights travel in
``embed.weight``. The query is never a key in the toolkit, so every row of ``hook_pattern`` has a 0 in the
query's column and the query's row [:, :, -1, :N] is the toolkit's attention of that layer and head.

The package is optional (``lipschitz-icl[interp]``) and imported only here, when a model is built: the rest of
the toolkit never loads it. ``write_export`` needs no TransformerLens; ``to_transformer_lens``, ``load_export``
and ``check_export`` do.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from . import __version__
from .api import Run, load_run
from .engines.prompts import draw_prompts
from .errors import UserInputError
from .evaluate import load_model
from .problem import build_inputs
from .rng import make_generator
from .store import atomic_write_bytes
from .tasks import make_task
from .transformer import ICLTransformer

PACKAGE = "transformer_lens"
NATIVE_MODULE = "transformer_lens.model_bridge.sources.native"  # TransformerBridge.boot_native (TransformerLens 4)
CONFIG_MODULE = "transformer_lens.config"  # TransformerBridgeConfig
INSTALL_HINT = 'pip install "transformer_lens>=4,<5" (or pip install "lipschitz-icl[interp]")'
FORMAT = "lipschitz-icl/transformer-lens-native/1"  # the "format" of an exported file
TARGETS = ("transformer-lens",)  # what ``lipschitz-icl export --to`` accepts
DTYPES = {"float32": torch.float32, "float64": torch.float64}
STREAM = "interop"  # the random stream of check_export's prompts (never shifts a run's own streams)
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-4}  # the largest |difference| check_export accepts


def installed() -> bool:
    """Whether transformer_lens can be imported here (found on the path; not imported)."""
    return importlib.util.find_spec(PACKAGE) is not None


def _require_package() -> None:
    """Refuse, in one line saying how to install it, when transformer_lens is missing."""
    if not installed():
        missing = f"needs the {PACKAGE} package, which is not installed: {INSTALL_HINT}"
        raise UserInputError(f"to_transformer_lens {missing}", cli=f"export --to transformer-lens {missing}")


def check_exportable(run: Run) -> None:
    """Refuse, in one line, a run whose model TransformerLens cannot hold (only ``transformer`` has one)."""
    kind = run.config.model.kind
    if kind != "transformer":
        raise UserInputError(f"model.kind={kind}: only a transformer run can be exported to TransformerLens "
                             f"(allowed: model.kind=transformer)")


def _dtype(run: Run, dtype: str | torch.dtype | None) -> torch.dtype:
    if dtype is None:
        return DTYPES[run.config.engine.dtype]
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise UserInputError(f"dtype={dtype!r}: not a floating-point type to export in (allowed: float32, float64)",
                         cli=f"--dtype {dtype}: not a floating-point type to export in (allowed: float32, float64)")


def bridge_config(model: ICLTransformer, d: int, N: int) -> dict[str, Any]:
    """The TransformerBridgeConfig fields of ``model`` (d input dimensions, N context tokens), as plain values."""
    block = model.blocks[0]
    width, layernorm = model.readout.in_features, isinstance(model.ln_f, torch.nn.LayerNorm)
    return {
        "d_model": width, "d_head": block.dh, "n_heads": block.h, "n_layers": len(model.blocks),
        "n_ctx": N + 1, "d_vocab": d + 2, "d_vocab_out": 1,  # tokens [x, y, 1]; one output, y_hat
        "d_mlp": 4 * width, "act_fn": "gelu", "attn_only": block.mlp is None,  # nn.GELU(): exact erf GELU
        "normalization_type": "LN" if layernorm else None, "eps": block.ln1.eps if layernorm else 1e-5,
        "attention_dir": "bidirectional", "positional_embedding_type": "standard",  # pos_embed = 0
        "use_attn_scale": True, "attn_scale": -1.0,  # -1: divide the scores by sqrt(d_head), as the toolkit
        "init_weights": False, "default_prepend_bos": False,
    }


def bridge_state(model: ICLTransformer, config: dict[str, Any], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """``model``'s parameters under the keys and shapes of ``TransformerBridge.boot_native(config)``."""
    src = {k: v.detach().to(dtype) for k, v in model.state_dict().items()}
    width = config["d_model"]

    def zeros(*shape: int) -> torch.Tensor:
        return torch.zeros(*shape, dtype=dtype)

    state = {"embed.weight": torch.cat([src["embed.weight"].T, src["embed.bias"][None]]),  # W_E: [W^T; b]
             "pos_embed.weight": zeros(config["n_ctx"], width)}
    for layer in range(config["n_layers"]):
        block = f"blocks.{layer}."  # the same prefix in both models
        for tl_name, name in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V"), ("o", "W_O")):
            state[f"{block}attn.{tl_name}.weight"] = src[f"{block}{name}.weight"]  # heads: rows h*d_head.. in both
            state[f"{block}attn.{tl_name}.bias"] = zeros(width)  # the toolkit's attention has no biases
        norms = ("ln1",) if config["attn_only"] else ("ln1", "ln2")
        if config["normalization_type"] == "LN":
            state.update({f"{block}{n}.{p}": src[f"{block}{n}.{p}"] for n in norms for p in ("weight", "bias")})
        if not config["attn_only"]:
            for tl_name, index in (("in", 0), ("out", 2)):  # nn.Sequential(Linear, GELU, Linear)
                state.update({f"{block}mlp.{tl_name}.{p}": src[f"{block}mlp.{index}.{p}"] for p in ("weight", "bias")})
    if config["normalization_type"] == "LN":
        state.update({f"ln_final.{p}": src[f"ln_f.{p}"] for p in ("weight", "bias")})
    state.update({"unembed.weight": src["readout.weight"], "unembed.bias": src["readout.bias"]})
    return state


def export_payload(run: Run | str | Path, dtype: str | torch.dtype | None = None) -> dict[str, Any]:
    """What an exported file holds (``write_export``): the format, the TransformerBridgeConfig fields, the
    dtype, the state dict, the prompt layout (d, N) and where it came from. Needs no TransformerLens."""
    run = run if isinstance(run, Run) else load_run(run)
    check_exportable(run)
    torch_dtype = _dtype(run, dtype)
    model = load_model(run)
    d, N = run.config.features.d, run.config.prompt.N
    config = bridge_config(model, d, N)
    return {"format": FORMAT, "config": config, "dtype": str(torch_dtype).removeprefix("torch."),
            "state_dict": bridge_state(model, config, torch_dtype), "d": d, "N": N,
            "source": {"run": str(run.dir) if run.dir is not None else None,
                       "config_hash": run.config.config_hash(), "lipschitz_icl": __version__}}


def write_export(run: Run | str | Path, path: str | Path, dtype: str | torch.dtype | None = None) -> Path:
    """Write ``export_payload(run, dtype)`` to ``path`` (torch.save; ``torch.load(path, weights_only=True)``
    reads it back, and so does ``load_export``)."""
    buffer = io.BytesIO()
    torch.save(export_payload(run, dtype), buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return Path(path)


@dataclass
class LensModel:
    """A TransformerLens model of a transformer run: ``bridge`` (a ``TransformerBridge``; every hook,
    ``run_with_cache``, ``run_with_hooks``) and the toolkit's prompt layout (``d`` dimensions, ``N`` context
    tokens), so that it takes the toolkit's inputs: x_ctx (B, N, d), y_ctx (B, N), x_q (B, d)."""

    bridge: Any
    d: int
    N: int
    payload: dict[str, Any] = field(repr=False, default_factory=dict)

    def inputs(self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> tuple[torch.Tensor,
                                                                                           torch.Tensor]:
        """(inputs_embeds (B, N+1, d_model), attention_mask (B, N+1)): the residual stream the toolkit's embedding
        makes of the tokens [x_i, y_i] and [x_q, 0], and the mask that keeps the query from being a key."""
        W_E = self.bridge.state_dict()["embed.weight"]  # noqa: N806 - (d+2, d_model): [W^T; b]
        B, N = x_ctx.shape[:2]
        dtype = W_E.dtype
        ctx = torch.cat([x_ctx.to(dtype), y_ctx.to(dtype).unsqueeze(-1)], dim=-1)
        query = torch.cat([x_q.to(dtype), torch.zeros_like(x_q[:, :1], dtype=dtype)], dim=-1).unsqueeze(1)
        tokens = torch.cat([ctx, query], dim=1)  # (B, N+1, d+1)
        embeds = F.linear(tokens, W_E[: self.d + 1].T.contiguous(), W_E[self.d + 1])
        mask = torch.ones(B, N + 1, dtype=torch.long)
        mask[:, N] = 0  # the query is no key (to any position), as in the toolkit
        return embeds, mask

    def predict(self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
        """y_hat (B,): the readout at the query position."""
        embeds, mask = self.inputs(x_ctx, y_ctx, x_q)
        return self.bridge(embeds, attention_mask=mask)[:, -1, 0]

    def run_with_cache(self, x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor,
                       **kwargs: Any) -> tuple[torch.Tensor, Any]:
        """(y_hat (B,), the ActivationCache of every hook); ``kwargs`` go to ``bridge.run_with_cache``."""
        embeds, mask = self.inputs(x_ctx, y_ctx, x_q)
        logits, cache = self.bridge.run_with_cache(embeds, attention_mask=mask, **kwargs)
        return logits[:, -1, 0], cache

    def query_attention(self, cache: Any) -> torch.Tensor:
        """The query's attention over the context, (B, n_layers, n_heads, N), from a cache's hook_pattern: the
        toolkit model's second output."""
        layers = self.bridge.cfg.n_layers
        return torch.stack([cache[f"blocks.{i}.attn.hook_pattern"][:, :, -1, : self.N] for i in range(layers)], 1)

    def save(self, path: str | Path) -> Path:
        """Write this model as ``write_export`` does: the payload it was built from, with the bridge's weights as
        they are now."""
        buffer = io.BytesIO()
        torch.save({**self.payload, "state_dict": dict(self.bridge.state_dict())}, buffer)
        atomic_write_bytes(Path(path), buffer.getvalue())
        return Path(path)


def lens_from_payload(payload: dict[str, Any]) -> LensModel:
    """Build the TransformerBridge an exported payload describes and load its weights (strict)."""
    _require_package()
    config_cls = importlib.import_module(CONFIG_MODULE).TransformerBridgeConfig
    boot = importlib.import_module(NATIVE_MODULE).boot  # TransformerBridge.boot_native
    dtype = DTYPES[payload["dtype"]]
    bridge = boot(config_cls(**payload["config"], dtype=dtype), dtype=dtype, model_name="lipschitz-icl")
    bridge.load_state_dict(payload["state_dict"], strict=True)
    return LensModel(bridge.eval(), payload["d"], payload["N"], payload)


def to_transformer_lens(run: Run | str | Path, dtype: str | torch.dtype | None = None) -> LensModel:
    """The TransformerLens model of a transformer run (a Run or a run directory), in ``dtype`` (float32 or
    float64; default the run's engine.dtype: a float32 run exported in float64 holds the same weights exactly).

    Refuses (UserInputError, one line) a run of another model kind, and says how to install TransformerLens
    when it is missing."""
    run = run if isinstance(run, Run) else load_run(run)
    check_exportable(run)
    _dtype(run, dtype)  # refused before transformer_lens is looked for
    _require_package()
    return lens_from_payload(export_payload(run, dtype))


def load_export(path: str | Path) -> LensModel:
    """The LensModel of a file written by ``write_export`` (or ``lipschitz-icl export``)."""
    try:
        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a corrupt or foreign file is bad input
        raise UserInputError(f"{path}: cannot be read as an exported model ({type(e).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise UserInputError(f"{path}: not a TransformerLens export of lipschitz-icl (format {FORMAT})")
    return lens_from_payload(payload)


def check_export(run: Run | str | Path, lens: LensModel, prompts: int = 64) -> dict[str, float]:
    """The largest |difference| between the run's model and ``lens`` on ``prompts`` prompts drawn from the run's
    setting (stream ``interop``): ``pattern`` (every layer's and head's query attention), ``prediction`` (y_hat);
    the toolkit model runs in the export's dtype. Both should be rounding error (``TOLERANCE``)."""
    run = run if isinstance(run, Run) else load_run(run)
    cfg = run.config
    dtype = lens.bridge.state_dict()["embed.weight"].dtype
    model = load_model(run).to(dtype)
    task = make_task(cfg.task.kind, cfg.task.L, cfg.features.d, cfg.task.params)
    batch = draw_prompts(build_inputs(cfg), task, cfg.prompt.N, prompts, cfg.task.label_noise,
                         make_generator(cfg.seed, STREAM))
    x_ctx, y_ctx, x_q = batch.x_ctx.to(dtype), batch.y_ctx.to(dtype), batch.x_q.to(dtype)
    with torch.no_grad():
        y_hat, attn = model(x_ctx, y_ctx, x_q)
        lens_y, cache = lens.run_with_cache(x_ctx, y_ctx, x_q)
        pattern = lens.query_attention(cache)
    return {"pattern": float((pattern - attn).abs().max()), "prediction": float((lens_y - y_hat).abs().max()),
            "prompts": prompts, "dtype": str(dtype).removeprefix("torch.")}
