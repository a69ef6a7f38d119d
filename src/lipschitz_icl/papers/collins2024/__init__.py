"""Collins, Parulekar, Mokhtari, Sanghavi, Shakkottai (NeurIPS 2024), *In-Context Learning with Transformers:
Softmax Attention Adapts to Function Lipschitzness*: claims CL1-CL6 (ids CL*, apart from this project's C1),
tested on inputs uniform on the sphere with the reduced softmax model and trained linear attention."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="collins2024",
    title="In-Context Learning with Transformers: Softmax Attention Adapts to Function Lipschitzness",
    authors="L. Collins, A. Parulekar, A. Mokhtari, S. Sanghavi, S. Shakkottai", year=2024, venue="NeurIPS 2024",
    arxiv="2402.11639",
    reachable="its abstract, its reviews and third-party summaries of it (the window scales inversely with L and "
              "grows with the label noise and shrinks with the context size; the attention acts as a "
              "Nadaraya-Watson estimator; linear attention cannot do the same; low-rank directional adaptation). "
              "The full text's theorems, constants and experimental settings were not reachable: CL1-CL6 are "
              "this project's statements of those directions, in its own setting (reduced model, Q^(0) = 0, "
              "inputs uniform on the sphere, the relu_net class, Adam on fresh prompts drawn in float32).",
    claims=("CL1", "CL2", "CL3", "CL4", "CL5", "CL6"),
))

from . import controls, suite  # noqa: E402, F401  (registration)
