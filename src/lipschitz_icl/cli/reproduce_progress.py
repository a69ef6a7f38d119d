"""The whole-job view of ``reproduce``: one overall bar (experiments done of all, the time left), a bar per
run group of the experiment under way named by its claims and what the group varies, and, into a log,
one line per experiment started and done with the time left. At most MAX_GROUP_BARS group bars are
shown, so the view stays a few rows high (a 24-row terminal never overflows)."""

from __future__ import annotations

import re
import statistics

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..experiments.registry import Experiment
from .common import err
from .progress import JobClock, duration, log_console, log_line

MAX_GROUP_BARS = 4  # bars of run groups shown at once (the oldest finished one goes first)
# Seconds each experiment took in `reproduce all --quick` (fused step, 2 cores; the wall_s of claims.json).
# Only their ratios matter: the time left is scaled by how the experiments done compare with these.
QUICK_SECONDS = {
    "exp_regimes": 31.4, "exp_oscillations": 16.5, "exp_beyond": 30.1, "exp_threshold": 52.3, "exp_scaling": 36.0,
    "exp_tuned": 11.2, "exp_predecessor": 3.5, "exp_sample_size_bound": 2.6, "exp_early_rate": 1.5,
    "exp_writeup": 8.6, "exp_linear_vs_nonlinear": 2.8, "exp_curriculum": 25.4, "exp_finite_training_set": 3.4,
    "exp_factored": 2.6, "exp_imbalanced": 1.4, "exp_token_noise": 9.9, "exp_large_L": 2.1, "exp_label_noise": 2.0,
    "exp_eps_axis": 1.4, "exp_regimes_visible": 4.2, "exp_continuous": 3.7, "exp_transformer": 38.2,
    "exp_linear_norm": 1.8, "exp_baselines": 4.1, "exp_collins": 125.0, "exp_predecessor_K": 6.9,
}
FULL_PER_QUICK = 6.7  # reproduce all at full size against --quick (536 s against 80 s, docs/PERFORMANCE.md)
_LEAD = re.compile(r"^(\([a-z](,[a-z])*\)|[A-Z]\d+[a-z]?)\s+")  # "(a,b) flat regime", "R4 eps axis"


def expected_seconds(experiments: list[Experiment], quick: bool) -> dict[str, float]:
    """Each experiment's expected seconds at the size (an experiment not in the table: the median)."""
    median = statistics.median(QUICK_SECONDS.values())
    factor = 1.0 if quick else FULL_PER_QUICK
    return {e.__name__: QUICK_SECONDS.get(e.__name__, median) * factor for e in experiments}


def short_claims(claims: list[str], shown: int = 2) -> str:
    """``P4 P4a +4`` for six claims: a bar's label stays short on an 80-column terminal."""
    return " ".join(claims[:shown]) + (f" +{len(claims) - shown}" if len(claims) > shown else "")


def group_label(label: str, claims: list[str]) -> str:
    """A run group's bar label: the claims of its experiment, then what the group varies, without the
    experiment's own lead (``(a,b) flat regime`` under P1, P2 -> ``P1 P2: flat regime``)."""
    what = _LEAD.sub("", label).strip() or label
    return f"{short_claims(claims)}: {what}" if claims else what


def reproduce_bar(disable: bool) -> Progress:
    """The bars on stderr: label, a short bar, done/total, and the time spent and left (overall bar)."""
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=16), MofNCompleteColumn(),
                    TextColumn("{task.fields[info]}"), console=err, transient=False, disable=disable)


class ReproduceProgress:
    """The ExperimentLog and ProgressHook of ``reproduce``, drawing on ``bar`` (None: no bars) and writing
    lines to ``log_console()``."""

    def __init__(self, experiments: list[Experiment], quick: bool, bar: Progress | None) -> None:
        self.claims = {e.__name__: list(getattr(e, "claims", [])) for e in experiments}
        self.total, self.done = len(experiments), 0
        self.clock = JobClock(expected_seconds(experiments, quick))
        self.bar, self.lines = bar, log_console()
        self.overall = bar.add_task("experiments", total=self.total, info="") if bar is not None else None
        self.groups: dict[str, int] = {}  # bar label -> task id, the experiment under way
        self.current: str | None = None

    def _status(self) -> str:
        return f"{duration(self.clock.elapsed())} spent · {duration(self.clock.eta())} left"

    def _refresh(self) -> None:
        if self.bar is not None:
            self.bar.update(self.overall, completed=self.done, info=self._status())

    def log(self, event: str, name: str, elapsed: float, detail: str = "") -> None:
        """checkpoint.ExperimentLog: an experiment ``started``, ``finished`` (after ``elapsed`` s) or ``reused``;
        ``detail`` says what was reused (a saved result, runs of an interrupted job)."""
        claims = " ".join(self.claims.get(name, []))
        if event == "started":
            self.current = name
            self.clock.start(name)
            text = f"started {name}, claims {claims} · experiment {self.done + 1}/{self.total}"
        else:
            self.done += 1
            self.clock.finish(name, elapsed if event == "finished" else None)
            self._clear_groups()
            self.current = None
            what = " ".join(w for w in (f"in {elapsed:.1f} s" if event == "finished" else "",
                                        f"({detail})" if detail else "") if w)
            text = f"{event} {name}{' ' + what if what else ''}, claims {claims} · {self.done}/{self.total} done · "
            text += self._status()
        if self.lines is not None:
            log_line(self.lines, text)
        self._refresh()

    def tick(self, label: str, done: int, total: int) -> None:
        """runner.ProgressHook: ``done`` of the ``total`` runs of a group of the experiment under way."""
        if self.bar is None:
            return
        name = group_label(label, self.claims.get(self.current or "", []))
        if name not in self.groups:
            self._drop_finished()
            self.groups[name] = self.bar.add_task(name, total=total, info="")
        self.bar.update(self.groups[name], completed=done, total=total)
        self._refresh()

    def _drop_finished(self) -> None:
        """Make room for a new group bar: the oldest (an experiment's groups run one after the other, so
        finished) goes once MAX_GROUP_BARS are shown."""
        while len(self.groups) >= MAX_GROUP_BARS:
            self.bar.remove_task(self.groups.pop(next(iter(self.groups))))

    def _clear_groups(self) -> None:
        if self.bar is not None:
            for task in self.groups.values():
                self.bar.remove_task(task)
        self.groups.clear()
