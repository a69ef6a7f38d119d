"""Imported once by the embedded cluster's fork server, so that every worker forked from it starts
warm: torch and the package (the runs' optimizers are the package's own, ``optim.py``, so no worker
imports ``torch._dynamo``, which any ``torch.optim`` optimizer would). Importing this module has no
other effect."""

from . import worker  # noqa: F401
