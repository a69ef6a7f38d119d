"""A companion write-up of Li, Duan, Liang (a blog post): weaker statements, checked as stated (B1-B7);
B5 is the write-up's own experiment, implemented as described with its evident bugs fixed."""

from __future__ import annotations

from ...experiments.registry import Paper, register_paper

PAPER = register_paper(Paper(
    id="writeup",
    title="A companion write-up of the paper (blog post)",
    venue="blog post",
    reachable="the whole post, including its experiment's code (which does not run as published: the fixes are "
              "listed in the report). In its experiment \"L\" scales the spread of the positive tokens; it is not a "
              "Lipschitz constant.",
    claims=("B1", "B2", "B3", "B4", "B5", "B6", "B7"),
))

from . import curriculum, early_rate, experiment, linear_vs_nonlinear, sample_size  # noqa: E402, F401
