"""The claims the toolkit tests, one package per source (paper): its metadata in the package's
``__init__`` (``register_paper``), then one module per claim or tightly linked group, each holding the
claim's statement, criterion, experiment and captions (``@experiment``). Importing this package
registers the built-in papers, in report order:

- ``li2025``: Li, Duan, Liang, *Provable In-Context Learning of Nonlinear Regression with Transformers*;
- ``huang2024``: its predecessor, Huang, Cheng, Liang, *In-Context Convergence of Transformers*;
- ``collins2024``: Collins, Parulekar, Mokhtari, Sanghavi, Shakkottai, *In-Context Learning with
  Transformers: Softmax Attention Adapts to Function Lipschitzness* (continuous inputs, linear attention);
- the linear-attention neighbours, held to closed forms on the exact engine (``lipschitz_icl.linattn``):
  ``zhang2025`` (Zhang, Singh, Latham, Saxe), ``zfb2024`` (Zhang, Frei, Bartlett), ``ahn2023`` (Ahn, Cheng,
  Daneshmand, Sra), ``mahankali2024`` (Mahankali, Hashimoto, Ma), ``lu2025`` (Lu, Letey, Zavatone-Veth, Maiti,
  Pehlevan);
- ``writeup``: a companion write-up of the paper (a blog post);
- ``questions``: this project's open questions about the paper, and the comparison with baselines.

A user's own paper is a package with the same layout, imported with ``load_plugins`` (the CLI's
``reproduce --plugins``); see docs/EXTENDING.md, "A paper". Not imported by the core."""

from __future__ import annotations

import importlib

from ..config_io import PluginImportError, import_isolated
from ..errors import UserInputError
from ..experiments.registry import Paper, paper_claims, paper_ids, papers, register_paper

BUILTIN = ("li2025", "huang2024", "collins2024", "zhang2025", "zfb2024", "ahn2023", "mahankali2024", "lu2025",
           "writeup", "questions")  # the built-in papers, in report order
for _name in BUILTIN:  # registration: each package registers its paper, then its claims' experiments
    importlib.import_module(f"{__name__}.{_name}")


def load_plugins(modules: list[str]) -> None:
    """Import user modules or packages that register papers, claims and experiments (plugins are code:
    only name modules you trust). One that cannot be imported raises UserInputError naming it."""
    for module in modules:
        try:
            import_isolated(module)
        except PluginImportError as e:
            hint = "; a plugin is a module or package on the Python path (e.g. PYTHONPATH=.)" if (
                str(e).startswith("cannot be imported")) else ""
            raise UserInputError(f"--plugins: module {module!r} {e}{hint}") from None


__all__ = ["BUILTIN", "Paper", "load_plugins", "paper_claims", "paper_ids", "papers", "register_paper"]
