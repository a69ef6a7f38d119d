"""Settings that are the same dynamics: a canonical form under the known invariances, and groups of copies.

A kernel-engine run trains the K x K scores M by M <- M - eta G (dL/dM) G (G = V^T V) on the loss

    L(M) = 1/2 sum_k p_k E_c[(a - e_k)^T Sigma (a - e_k) + tau^2 sum_n a_n^2 / c_n],

so its trajectory depends on (G, Sigma, p, the law of the counts c, tau, eta, M0) alone. Four
invariances make different configs the same trajectory (a copy), possibly in rescaled time:

- **Sigma modulo u 1^T + 1 u^T.** The attention weights sum to 1, so (a - e_k) sums to 0 and
  (a - e_k)^T (u 1^T + 1 u^T) (a - e_k) = 0: only C = P Sigma P matters (P = I - 1 1^T / K).
- **Scale (eta L^2).** (Sigma, tau^2) -> lambda (Sigma, tau^2) with eta -> eta / lambda, and G -> mu G with
  eta -> eta / mu^2, give the same steps: every built-in class is f = L g, so L enters through
  eta L^2 without label noise; a common rescaling c of the features scales G by c^2 (and, for a
  homogeneous class, Sigma by c^2). The form keeps C / s_C and G / s_G; ``rate`` = eta s_C s_G^2 is the
  time scale (equal shapes agree at t rate) and ``loss_scale`` = s_C the loss scale.
- **Permutations** of the features (G, Sigma, p permuted together): the form takes a canonical order.
- **Mean-field counts** c = N p: N cancels from the attention weights and enters only the label-noise
  term, as tau^2 / N.
- **Symmetry.** With uniform p, G = alpha I + beta 1 1^T and a class whose law is rotation-invariant
  (``TaskClass.rotation_invariant``: Sigma is then a function of G, so Sigma = a I + b 1 1^T too), the
  gradient is symmetric with zero row and column sums, G's 1 1^T part drops out of G (dL/dM) G, and
  every such setting is one trajectory up to scale: orthonormal and simplex features, every built-in
  class, any d (the form is the population's; a Monte-Carlo Sigma's noise is not a difference).

Equal ``shape`` means equal trajectories of everything that does not read the time or loss scale
(attention, relative losses, phases, T eta L^2). ``tests/test_equivalence.py`` proves each invariance
on trajectories (to 1e-9) and that different shapes train different ones.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field

import numpy as np

from .config import NEURAL_MODELS, Config
from .problem import Problem, build_problem

RTOL = 1e-7  # two canonical forms are one setting when every number agrees to this (relative to its scale)
DIGITS = 6  # significant digits in a fingerprint (display and hashing only)
MAX_TIE_PERMUTATIONS = 40_320  # orderings tried among features that no invariant key tells apart (8!)


@dataclass(frozen=True)
class SettingForm:
    """The canonical form of one run's setting (see the module docstring)."""

    kind: dict  # what is compared exactly: engine, optimizer, K, N, counts law, symmetric, dtype
    G: np.ndarray  # G / s_G in canonical order (alpha-normalised identity when symmetric)
    C: np.ndarray  # P Sigma P / s_C in canonical order (P when symmetric)
    p: np.ndarray  # p_k in canonical order
    noise_ratio: float  # tau^2 / s_C: label noise relative to the signal (0 without)
    M0: np.ndarray  # initial scores / their scale (zeros for Q0 = 0)
    rate: float  # eta s_C s_G^2: time scale (eta for Adam, whose steps do not scale with the gradient)
    loss_scale: float  # s_C
    raw: dict = field(default_factory=dict)  # what the reductions removed: L, eta, scales, permutation

    @property
    def fingerprint(self) -> str:
        """A short hash of the shape (rounded to DIGITS significant digits), e.g. 's3f9c01a2'."""
        def r(x):
            return [float(f"{v:.{DIGITS}g}") for v in np.asarray(x, dtype=float).ravel()]
        text = json.dumps([self.kind, r(self.G), r(self.C), r(self.p), r([self.noise_ratio]), r(self.M0)],
                          sort_keys=True)
        return "s" + hashlib.sha256(text.encode()).hexdigest()[:8]

    def same_shape(self, other: SettingForm, rtol: float = RTOL) -> bool:
        """One trajectory up to the time and loss scales."""
        if self.kind != other.kind:
            return False
        pairs = [(self.G, other.G), (self.C, other.C), (self.p, other.p), (self.M0, other.M0),
                 (np.array([self.noise_ratio]), np.array([other.noise_ratio]))]
        return all(a.shape == b.shape and np.allclose(a, b, rtol=rtol, atol=rtol * max(1.0, float(np.abs(b).max(
            initial=0.0)))) for a, b in pairs)

    def same_run(self, other: SettingForm, rtol: float = RTOL) -> bool:
        """One trajectory step for step: the same shape at the same time scale."""
        return self.same_shape(other, rtol) and math.isclose(self.rate, other.rate, rel_tol=rtol)


def setting_form(setting: Config | Problem) -> SettingForm:
    """The canonical form of a config's (or a built problem's) setting."""
    problem = setting if isinstance(setting, Problem) else build_problem(setting)
    cfg = problem.config
    G = problem.features.gram.double().cpu().numpy()
    sigma = problem.kernel.sigma.double().cpu().numpy()
    p = problem.features.p.double().cpu().numpy()
    K = len(p)
    P = np.eye(K) - np.ones((K, K)) / K
    C = P @ (0.5 * (sigma + sigma.T)) @ P
    s_C = float(np.trace(C) / max(K - 1, 1)) or 1.0
    symmetric = _symmetric(G, p, problem)
    s_G = _symmetric_scale(G) if symmetric else float(np.trace(G) / K)
    tau = float(cfg.task.label_noise)
    adam = cfg.train.optimizer == "adam"
    mean_field = cfg.engine.kind == "kernel" and cfg.engine.counts == "mean_field"
    # mean-field counts c = N p: N cancels from the attention, and enters only the noise term tau^2 / (N p_n)
    noise_ratio = tau**2 / (s_C * cfg.prompt.N) if mean_field else tau**2 / s_C
    kind = {"engine": cfg.engine.kind, "optimizer": cfg.train.optimizer, "K": K,
            "N": "any (mean field)" if mean_field else cfg.prompt.N,
            "counts": _counts_law(cfg), "symmetric": symmetric, "noise": float(problem.features.noise),
            "model": cfg.model.kind}
    if cfg.model.init == "random" or (cfg.model.init == "auto" and cfg.model.kind in NEURAL_MODELS):
        kind["init"] = f"{cfg.model.init}:seed{cfg.seed}"  # a random Q0: each seed its own setting
    M0 = np.zeros((K, K))
    if symmetric:
        Gc, Cc, pc, order = np.eye(K), P.copy(), np.full(K, 1.0 / K), list(range(K))
    else:
        Gc, Cc, pc, order = _canonical_order(G / s_G, C / s_C, p)
    M0c = M0[np.ix_(order, order)] / max(1.0, float(np.abs(M0).max(initial=0.0)))
    rate = float(cfg.train.lr) if adam else float(cfg.train.lr) * s_C * s_G**2
    raw = {"L": float(cfg.task.L), "eta": float(cfg.train.lr), "s_G": s_G, "s_C": s_C, "order": order,
           "task": cfg.task.kind, "features": cfg.features.kind, "scale": float(cfg.features.scale),
           "d": cfg.features.d}
    return SettingForm(kind, Gc, Cc, pc, noise_ratio, M0c, rate, s_C, raw | {"N": cfg.prompt.N})


def _counts_law(cfg: Config) -> str:
    if cfg.engine.kind != "kernel":
        return f"prompts:{cfg.engine.batch}:{cfg.engine.train_prompts}"
    if cfg.engine.counts == "multinomial":
        return f"multinomial:{cfg.engine.draws}" + (":resampled" if cfg.resample else "")
    return str(cfg.engine.counts)


def _symmetric_scale(G: np.ndarray) -> float:
    """alpha of G = alpha I + beta 1 1^T."""
    K = G.shape[0]
    return float(np.trace(G) / K - (G.sum() - np.trace(G)) / (K * (K - 1))) if K > 1 else float(G[0, 0])


def _symmetric(G: np.ndarray, p: np.ndarray, problem: Problem) -> bool:
    """Uniform p, G = alpha I + beta 1 1^T, a rotation-invariant class, noise-free kernel-engine tokens."""
    K = len(p)
    if K < 2 or not np.allclose(p, 1.0 / K, rtol=1e-12, atol=0):
        return False
    off = G[~np.eye(K, dtype=bool)]
    scale = float(np.abs(G).max())
    if np.ptp(np.diag(G)) > 1e-9 * scale or np.ptp(off) > 1e-9 * scale:
        return False
    return bool(problem.task.rotation_invariant) and problem.features.noise == 0


def _feature_keys(G: np.ndarray, C: np.ndarray, p: np.ndarray) -> list[tuple]:
    """A permutation-invariant description of each feature (rounded), to sort by."""
    def r(x):
        return round(float(x), 9)
    return [(r(p[k]), r(G[k, k]), r(C[k, k]), tuple(sorted(r(x) for x in G[k])), tuple(sorted(r(x) for x in C[k])))
            for k in range(len(p))]


def _canonical_order(G: np.ndarray, C: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """G, C, p reordered canonically: features sorted by an invariant key; among ties (while few enough),
    the ordering whose rounded matrices are lexicographically least. Two settings that are permutations of
    each other get equal matrices; settings that are not never do (the result is a permutation of the input)."""
    keys = _feature_keys(G, C, p)
    base = sorted(range(len(p)), key=lambda k: keys[k])
    ties = [list(g) for _, g in itertools.groupby(base, key=lambda k: keys[k])]
    count = math.prod(math.factorial(len(t)) for t in ties)
    best, best_key = base, None
    if count <= MAX_TIE_PERMUTATIONS:
        for choice in itertools.product(*(itertools.permutations(t) for t in ties)):
            order = [k for part in choice for k in part]
            key = tuple(np.round(np.concatenate([G[np.ix_(order, order)].ravel(), C[np.ix_(order, order)].ravel()]),
                                 9))
            if best_key is None or key < best_key:
                best, best_key = order, key
    return G[np.ix_(best, best)], C[np.ix_(best, best)], p[best], best


@dataclass
class SettingGroup:
    """Settings of one shape: the first member represents the rest (its copies)."""

    fingerprint: str
    members: list[str]
    forms: list[SettingForm]
    copies_by: list[list[str]]  # per member after the first: the invariances that made it a copy

    def as_dict(self) -> dict:
        return {"fingerprint": self.fingerprint, "members": self.members,
                "copies": {m: by for m, by in zip(self.members[1:], self.copies_by, strict=True)}}


def merged_by(a: SettingForm, b: SettingForm) -> list[str]:
    """The invariances under which ``b`` is a copy of ``a`` (what differs between them before reduction)."""
    ra, rb = a.raw, b.raw
    why = []
    if not math.isclose(a.rate, b.rate, rel_tol=RTOL) or ra["L"] != rb["L"] or ra["eta"] != rb["eta"]:
        why.append("eta L^2 (time rescaling)")
    if not math.isclose(ra["s_G"], rb["s_G"], rel_tol=RTOL) or ra["scale"] != rb["scale"]:
        why.append("feature rescaling")
    if ra["task"] != rb["task"]:
        why.append("Sigma mod u1^T + 1u^T (rotation-invariant classes)" if a.kind["symmetric"] else "Sigma scale")
    if ra["features"] != rb["features"] or ra["d"] != rb["d"]:
        why.append("symmetric features (G = aI + b11^T)" if a.kind["symmetric"] else "feature geometry")
    if ra["order"] != rb["order"] and not a.kind["symmetric"]:
        why.append("permutation")
    if ra["N"] != rb["N"]:
        why.append("N (mean-field counts: N p cancels from the attention)")
    return why or ["identical settings"]


def group_settings(named: list[tuple[str, SettingForm]], by: str = "shape") -> list[SettingGroup]:
    """Group settings into copies: ``by="shape"`` (one trajectory up to time and loss scale), ``"run"``
    (one trajectory step for step) or ``"loss"`` (step for step at the same loss scale: what a statistic at an
    absolute accuracy reads). Groups in order of first appearance."""
    groups: list[SettingGroup] = []
    for name, form in named:
        for g in groups:
            first = g.forms[0]
            same = first.same_shape(form) if by == "shape" else first.same_run(form) and (
                by != "loss" or math.isclose(first.loss_scale, form.loss_scale, rel_tol=RTOL))
            if same:
                g.members.append(name)
                g.forms.append(form)
                g.copies_by.append(merged_by(g.forms[0], form))
                break
        else:
            groups.append(SettingGroup(form.fingerprint, [name], [form], []))
    return groups
