"""The whole-job view of ``reproduce``: one overall bar (experiments done of all, the time left), a bar per
run group of the experiment under way named by its claims and what the group varies, and, into a log,
one line per experiment started and done with the time left. At most MAX_GROUP_BARS group bars are
shown, so the view stays a few rows high (a 24-row terminal never overflows)."""

from __future__ import annotations

import re

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from ..experiments.durations import expected_seconds
from ..experiments.registry import Experiment
from .common import err
from .progress import JobClock, duration, log_console, log_line

MAX_GROUP_BARS = 4  # bars of run groups shown at once (the oldest finished one goes first)
_LEAD = re.compile(r"^(\([a-z](,[a-z])*\)|[A-Z]\d+[a-z]?)\s+")  # "(a,b) flat regime", "R4 eps axis"


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

    def __init__(self, experiments: list[Experiment], quick: bool, bar: Progress | None, jobs: int = 1) -> None:
        self.claims = {e.__name__: list(getattr(e, "claims", [])) for e in experiments}
        self.total, self.done, self.begun = len(experiments), 0, 0  # begun: started or reused
        self.clock = JobClock(expected_seconds(experiments, quick), lanes=jobs)
        self.bar, self.lines = bar, log_console()
        self.overall = bar.add_task("experiments", total=self.total, info="") if bar is not None else None
        self.groups: dict[str, tuple[str, int]] = {}  # bar label -> (its experiment, task id)
        self.current: str | None = None  # the experiment started last (one at a time: the one under way)

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
            self.current, self.begun = name, self.begun + 1
            self.clock.start(name)
            text = f"started {name}, claims {claims} · experiment {self.begun}/{self.total}"
        else:
            self.done, self.begun = self.done + 1, self.begun + (event == "reused")
            self.clock.finish(name, elapsed if event == "finished" else None)
            self._clear_groups(name)
            self.current = None if self.current == name else self.current
            what = " ".join(w for w in (f"in {elapsed:.1f} s" if event == "finished" else "",
                                        f"({detail})" if detail else "") if w)
            text = f"{event} {name}{' ' + what if what else ''}, claims {claims} · {self.done}/{self.total} done · "
            text += self._status()
        if self.lines is not None:
            log_line(self.lines, text)
        self._refresh()

    def tick(self, label: str, done: int, total: int) -> None:
        """runner.ProgressHook: ``done`` of the ``total`` runs of a group of the experiment under way."""
        self.tick_for(self.current or "", label, done, total)

    __call__ = tick  # the view is the hook: checkpoint.tick_of finds its tick_for

    def tick_for(self, experiment: str, label: str, done: int, total: int) -> None:
        """``done`` of the ``total`` runs of a group of ``experiment`` (one of several running side by side)."""
        if self.bar is None:
            return
        name = group_label(label, self.claims.get(experiment, []))
        if name not in self.groups:
            self._drop_oldest()
            self.groups[name] = (experiment, self.bar.add_task(name, total=total, info=""))
        self.bar.update(self.groups[name][1], completed=done, total=total)
        self._refresh()

    def _drop_oldest(self) -> None:
        """Make room for a new group bar: the oldest goes once MAX_GROUP_BARS are shown."""
        while len(self.groups) >= MAX_GROUP_BARS:
            self.bar.remove_task(self.groups.pop(next(iter(self.groups)))[1])

    def _clear_groups(self, experiment: str) -> None:
        """Remove the bars of ``experiment``'s groups (it finished)."""
        for name in [n for n, (exp, _) in self.groups.items() if exp == experiment]:
            _, task = self.groups.pop(name)
            if self.bar is not None:
                self.bar.remove_task(task)
