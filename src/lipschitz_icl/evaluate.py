"""In-context evaluation of a trained run against baselines, on the very same prompts.

For each task class (the run's own, and a held-out one) and each number of context examples
n, draw P prompts of functions never used in training (their own random stream, ``evaluate:<class>``),
from the run's features, token noise and label noise; the prompts are nested, so the n-example
context is the first n tokens of the largest one. Every method predicts f(x_q) from the same
n examples; the error is 1/2 E[(y_hat - f(x_q))^2] (the run's ``test_error`` at n = N), with
its standard error over prompts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd
import pyarrow as pa
import torch
from torch import nn

from .api import Run, load_run
from .api import run as run_config
from .baselines import BASELINES, USES_DISTANCES, gp_regression, kernel_posterior_mean, pairwise_sq_dists
from .config import Config, EngineConfig, EvalConfig, ModelConfig, TrainConfig
from .config_io import short
from .contract import einsum
from .engines import device_option, draw_prompts, make_generator, resolve_device
from .engines.prompts import PromptBatch
from .errors import UserInputError
from .features import FeatureSet
from .limits import MAX_ENV, max_elements
from .models import make_model
from .problem import build_inputs, dtype_of
from .store import PARAMS_FILE, atomic_write_bytes, atomic_write_parquet, read_params
from .tasks import TaskClass, make_task, task_names

EVALUATION_PARQUET, EVALUATION_CSV = "evaluation.parquet", "evaluation.csv"
COLUMNS = ["n_context", "method", "class", "error", "se", "beyond_N"]  # beyond_N: n > the training N
MODEL = "trained attention (this run)"  # the run's own model at its trained parameters (Q for reduced)
LINEAR = "linear attention (GD)"  # y_hat = sum_i y_i x_i^T Gamma x_q / n, Gamma trained here by GD
LINEAR_STEPS, LINEAR_BATCH = 300, 512  # the linear-attention baseline's budget: GD on one fixed batch
BAYES = "Bayes (Sigma)"  # kernel regression on the feature ids with the class's own Sigma and tau^2
CHUNK_ELEMENTS = 2**22  # prompts are processed in chunks of about this many P * n * (n + d) entries
KERNEL_COPIES = 8  # n x n matrices of one prompt alive at once (distances, weights, kernel, factor, inverse)

ProgressFn = Callable[[int, int], None]  # (done, total) evaluation cells


def load_model(run: Run) -> nn.Module:
    """The run's model with its trained parameters: ``run.params`` when the run holds them (a run made with
    ``write=False``, or loaded), else its params.pt (loaded with weights_only=True), checked (``check_params``)."""
    if run.params is None and run.dir is None:
        raise UserInputError("the run has no trained parameters (no run.params, and no directory with params.pt)")
    cfg = run.config
    model = make_model(cfg.model, cfg.features.d, make_generator(cfg.seed, "init"), dtype_of(cfg), "cpu")
    if run.params is not None:
        state = run.params
    else:
        with warnings.catch_warnings():  # torch warns about a file's pickle protocol before refusing it
            warnings.simplefilter("ignore")
            state = read_params(run.dir)
    where = str(run.dir / PARAMS_FILE) if run.dir is not None else "the run's parameters"
    if not isinstance(state, Mapping):
        raise UserInputError(f"{where}: not a mapping of parameter names to tensors (got {type(state).__name__})")
    odd = next((k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)), None)
    if odd is not None:
        raise UserInputError(f"{where}: parameter {short(odd, 40)} is not a tensor under a name (allowed: text keys "
                             f"such as {', '.join(model.state_dict())}, each a tensor)")
    check_params(state, model, where, cfg.model.kind)
    model.load_state_dict(state)
    return model.eval()


MAX_PARAM = 1e8  # the largest |value| a parameter may hold for evaluate (far beyond any trained one)


def check_params(state: dict[str, torch.Tensor], model: nn.Module, where: str, kind: str) -> None:
    """Refuse parameters that are not the model's (other names or shapes), not real floating point (bool,
    integer), or not finite and at most MAX_PARAM in size: evaluate would otherwise report numbers of them."""
    expected = model.state_dict()
    if set(state) != set(expected):
        raise UserInputError(f"{where}: parameters {sorted(map(str, state))[:6]} are not those of a {kind} model "
                             f"(expected {sorted(expected)})")
    for key, value in state.items():
        shape, want = tuple(value.shape), tuple(expected[key].shape)
        if shape != want:
            raise UserInputError(f"{where}: parameter {key!r} has shape {shape} (a {kind} model's is {want})")
        if not value.is_floating_point():
            raise UserInputError(f"{where}: parameter {key!r} is {str(value.dtype).removeprefix('torch.')} "
                                 "(floating-point values expected)")
        if value.numel() and not bool(torch.isfinite(value).all()):
            raise UserInputError(f"{where}: parameter {key!r} holds NaN or infinite values (finite values expected)")
        if value.numel() and float(value.abs().max()) > MAX_PARAM:
            raise UserInputError(f"{where}: parameter {key!r} holds values up to {float(value.abs().max()):.3g} "
                                 f"(at most {MAX_PARAM:g} in size expected)")


def default_contexts(N: int) -> list[int]:
    """1, 2, 4, ... up to 4N, and N, 2N, 4N: beyond the training N, length generalisation."""
    out = [2**i for i in range(int(math.log2(4 * N)) + 1) if 2**i <= 4 * N]
    return sorted(set(out) | {N, 2 * N, 4 * N})


def linear_step_size(cfg: Config, fs, task: TaskClass) -> float:
    """GD step 1/lambda_max for linear attention: its loss is quadratic in Gamma, y_hat = <Gamma, S>
    with S = sum_i y_i x_i x_q^T / N, so the Hessian is E[vec S vec S^T], estimated on one batch."""
    batch = draw_prompts(fs, task, cfg.prompt.N, LINEAR_BATCH, cfg.task.label_noise,
                         make_generator(cfg.seed, "evaluate:linear_step"))
    S = einsum("bn,bni,bj->bij", batch.y[:, :-1], batch.x[:, :-1], batch.x[:, -1]) / cfg.prompt.N  # noqa: N806
    flat = S.reshape(LINEAR_BATCH, -1)
    lam = float(torch.linalg.matrix_norm(flat, ord=2)) ** 2 / LINEAR_BATCH  # top eigenvalue, no d^2 x d^2 matrix
    return 1.0 / lam if lam > 0 else 1.0


def train_linear_attention(cfg: Config, fs, task: TaskClass, device: torch.device | str = "cpu") -> nn.Module:
    """The linear-attention baseline: trained once, seeded, by GD on the run's own task class, features,
    noise and N (the sampled engine, one fixed batch of LINEAR_BATCH prompts, LINEAR_STEPS steps), on
    ``device``, where it is returned."""
    lin = cfg.model_copy(deep=True)
    lin.name = None
    lin.engine = EngineConfig(kind="sampled", batch=LINEAR_BATCH, dtype="float64", device=torch.device(device).type)
    lin.model = ModelConfig(kind="linear_attention")
    lin.train = TrainConfig(optimizer="gd", lr=linear_step_size(cfg, fs, task), steps=LINEAR_STEPS,
                            eps=1e-12, log_every=LINEAR_STEPS)
    lin.eval = EvalConfig(functions=16)
    with torch.enable_grad():  # evaluate_run itself runs under no_grad
        params = run_config(lin, write=False).params
    model = make_model(lin.model, cfg.features.d, make_generator(cfg.seed, "init"), torch.float64, "cpu")
    model.load_state_dict(params)
    return model.to(device).eval()


def default_classes(run: Run) -> list[str]:
    """The run's class and a held-out one (eval.other_class, else relu_net, or linear for relu_net)."""
    own = run.config.task.kind
    other = run.config.eval.other_class or ("linear" if own == "relu_net" else "relu_net")
    return [own] if other == own else [own, other]


def _check(contexts: list[int], classes: list[str], prompts: int) -> None:
    """Refuse bad options before anything is drawn: the sizes, and the class names."""
    if prompts < 2:
        raise _refused("prompts", "--prompts", f"must be at least 2 (got {prompts})")
    bad = [n for n in contexts if n < 1]
    if not contexts or bad:
        raise _refused("contexts", "--contexts", f"must be positive integers (got {contexts})")
    known = task_names()
    for c in classes:
        if c not in known:
            raise _refused("classes", "--class", f"{c!r} is not registered (known: {', '.join(known)})")


def _refused(argument: str, option: str, what: str) -> UserInputError:
    """Bad input to ``evaluate_run``, named by its argument (``prompts``) or, on the command line, its option."""
    return UserInputError(f"{argument}: {what}", cli=f"{option} {what}")


def _check_sizes(prompts: int, n_max: int, tasks: dict[str, TaskClass], d: int) -> None:
    """Refuse, before anything is allocated, an evaluation whose working set would exceed
    the element limit: the n x n matrices of one prompt, and the drawn prompts of each class."""
    MAX_ELEMENTS = max_elements()  # noqa: N806 - the limit, read once
    if KERNEL_COPIES * n_max * n_max > MAX_ELEMENTS:
        allowed = math.isqrt(MAX_ELEMENTS // KERNEL_COPIES)
        why = (f"{n_max}: at most {allowed} context examples (one prompt's n x n kernel matrices would need about "
               f"{KERNEL_COPIES * n_max * n_max:.3g} elements in memory, at most {MAX_ELEMENTS:.3g}; {MAX_ENV} raises "
               "the limit)")
        raise UserInputError(f"contexts={why}", cli=f"--contexts {why}")
    points = n_max + 1  # context tokens and the query
    for name, task in tasks.items():
        per_prompt = 4 * max(points * d, task.elements(1, points))
        if prompts * per_prompt > MAX_ELEMENTS:
            why = (f"{prompts}: at most {MAX_ELEMENTS // per_prompt} with contexts up to {n_max} and d = {d} (the "
                   f"{name} prompts would need about {prompts * per_prompt:.3g} elements in memory, at most "
                   f"{MAX_ELEMENTS:.3g}; {MAX_ENV} raises the limit)")
            raise UserInputError(f"prompts={why}", cli=f"--prompts {why}")


def context_distances(x_ctx: torch.Tensor) -> torch.Tensor | None:
    """||x_i - x_j||^2 of a chunk's contexts, computed once for every baseline that uses them."""
    return pairwise_sq_dists(x_ctx)


def _predict(method: str, fn, model, x_ctx, y_ctx, x_q, noise: float, sq_ctx: torch.Tensor | None) -> torch.Tensor:
    if method in (MODEL, LINEAR):
        model = fn if method == LINEAR else model  # the linear-attention baseline travels as its fn
        dt = next(model.parameters()).dtype
        return model(x_ctx.to(dt), y_ctx.to(dt), x_q.to(dt))[0].to(x_ctx.dtype)
    kwargs = {"sq_ctx": sq_ctx} if method in USES_DISTANCES else {}
    if fn is gp_regression:
        kwargs["noise"] = noise
    return fn(x_ctx, y_ctx, x_q, **kwargs)


def chunk_prompts(n: int, d: int) -> int:
    """Prompts per chunk at n context examples in d dimensions: (chunk, n, n) and (chunk, n, d) arrays."""
    return max(1, CHUNK_ELEMENTS // (n * (n + d)))


def _cell_errors(batch: PromptBatch, n: int, sigma: torch.Tensor | None, model: nn.Module, linear: nn.Module,
                 tau: float) -> dict:
    """Per-prompt errors 1/2 (y_hat - f(x_q))^2 of every method at n context examples (the Bayes
    predictor on the feature ids only when there are features: ``sigma`` is None for continuous inputs)."""
    methods = {MODEL: None, LINEAR: linear, **BASELINES}
    gp_noise = 1e-3 + tau**2  # the GP's noise variance: small, plus the known label noise
    errs: dict[str, list[torch.Tensor]] = {m: [] for m in [*methods, *([BAYES] if sigma is not None else [])]}
    prompts, target = batch.x.shape[0], batch.target
    chunk = chunk_prompts(n, batch.x.shape[-1])
    for s in range(0, prompts, chunk):
        rows = slice(s, s + chunk)
        x_ctx, y_ctx, x_q = batch.x[rows, :n], batch.y[rows, :n], batch.x[rows, -1]
        sq_ctx = context_distances(x_ctx)
        for method, fn in methods.items():
            y_hat = _predict(method, fn, model, x_ctx, y_ctx, x_q, gp_noise, sq_ctx)
            errs[method].append(0.5 * (y_hat - target[rows]).square())
        if sigma is not None:
            y_bayes = kernel_posterior_mean(sigma, batch.ids[rows, :n], y_ctx, batch.ids[rows, -1], tau**2)
            errs[BAYES].append(0.5 * (y_bayes - target[rows]).square())
    return {m: torch.cat(parts).double() for m, parts in errs.items()}


def exact_baseline_warning(name: str, batch: PromptBatch, contexts: list[int], noise_free: bool) -> str | None:
    """With noise-free tokens and labels, 1-NN returns f(x_q) itself on every prompt whose context
    holds the query's feature: a warning naming the first n from which that is every prompt."""
    if not noise_free:
        return None
    for n in contexts:
        if bool((batch.ids[:, :n] == batch.ids[:, -1:]).any(-1).all()):
            return (f"{name}: from n = {n} every prompt's context holds its query's feature, and tokens and labels "
                    "are noise-free, so 1-NN (and the Bayes predictor) are exact there: their zero error says "
                    "nothing about learning")
    return None


@torch.no_grad()
def evaluate_run(
    run: Run | str | Path,
    prompts: int = 512,
    contexts: list[int] | None = None,
    classes: list[str] | None = None,
    progress: ProgressFn | None = None,
    device: str | None = None,
) -> pd.DataFrame:
    """The tidy evaluation table: n_context, method, class, error, se, beyond_N (n > the training N:
    length generalisation). Methods: the run's trained model ``MODEL``, the linear-attention baseline
    ``LINEAR`` trained here by GD, the baselines, and the class's kernel predictor ``BAYES``.
    ``table.attrs["warnings"]``: baselines that are exact. ``device`` (auto, cpu, cuda; default: the
    run's ``engine.device``): where the model, the baselines and the prompts are computed; the prompts
    are drawn on the CPU, so every device sees the same ones."""
    run = run if isinstance(run, Run) else load_run(run)
    cfg = run.config
    contexts = sorted(set(contexts or default_contexts(cfg.prompt.N)))
    classes = list(dict.fromkeys(classes or default_classes(run)))
    _check(contexts, classes, prompts)
    tasks = {name: make_task(name, cfg.task.L, cfg.features.d, cfg.task.params if name == cfg.task.kind else {})
             for name in classes}
    _check_sizes(prompts, max(contexts), tasks, cfg.features.d)
    dev = resolve_device(cfg.engine.device) if device is None else device_option(device, "device")
    model = load_model(run).to(dev)
    fs = build_inputs(cfg)  # the run's features, or its continuous input distribution
    linear = train_linear_attention(cfg, fs, make_task(cfg.task.kind, cfg.task.L, cfg.features.d, cfg.task.params),
                                    dev)
    tau = cfg.task.label_noise
    finite = isinstance(fs, FeatureSet)  # continuous inputs never repeat a token: no exact baselines, no Bayes
    noise_free = finite and cfg.features.noise == 0 and tau == 0
    rows, warns, done, total = [], [], 0, len(classes) * len(contexts)
    for name, task in tasks.items():
        sigma = task.kernel(fs.V, make_generator(cfg.seed, "kernel"), cfg.task.kernel_samples).sigma.to(dev) \
            if finite else None  # Sigma on the features
        batch = draw_prompts(fs, task, max(contexts), prompts, tau, make_generator(cfg.seed, f"evaluate:{name}"), dev)
        warns.append(exact_baseline_warning(name, batch, contexts, noise_free))
        for n in contexts:
            for method, e in _cell_errors(batch, n, sigma, model, linear, tau).items():
                se = float(e.std() / math.sqrt(len(e)))
                rows.append((n, method, name, float(e.mean()), se, n > cfg.prompt.N))
            done += 1
            if progress is not None:
                progress(done, total)
    table = pd.DataFrame(rows, columns=COLUMNS)
    table.attrs["warnings"] = [w for w in warns if w]
    return table


def write_evaluation(table: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """evaluation.parquet and evaluation.csv, each written atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(out / EVALUATION_PARQUET, pa.Table.from_pandas(table, preserve_index=False))
    atomic_write_bytes(out / EVALUATION_CSV, table.to_csv(index=False).encode("utf-8"))
    return [out / EVALUATION_PARQUET, out / EVALUATION_CSV]
