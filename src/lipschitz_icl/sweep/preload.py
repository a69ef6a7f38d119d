"""Imported once by the embedded cluster's fork server, so that every worker forked from it starts
warm: torch, the package, and ``torch._dynamo``, which the first ``torch.optim`` optimizer of a
process imports lazily (about 2 s). Importing this module has no other effect."""

import torch._dynamo  # noqa: F401

from . import worker  # noqa: F401
