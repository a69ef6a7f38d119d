"""Whole-job progress for long commands: the time left to a job of known parts, and progress lines for
a log. On a terminal a job shows live bars (stderr); into a file or a pipe it writes one line per part
done, with the time spent and the time left, so ``reproduce all --quick > log.txt`` says how far it is.

Lines go to stderr when stderr is not a terminal (logs, CI), else to stdout when stdout is not one
(``> log.txt``); on two terminals only the bars are shown."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console

from .common import err, esc, out


def log_console() -> Console | None:
    """Where progress lines go (see the module docstring), or None when both outputs are terminals."""
    if not err.is_terminal:
        return err
    if not out.is_terminal:
        return out
    return None


def duration(seconds: float | None) -> str:
    """``1:02`` or ``1:02:03``; ``?`` without an estimate."""
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(round(max(0.0, seconds))), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def log_line(console: Console, text: str) -> None:
    console.print(esc(f"[{time.strftime('%H:%M:%S')}] {text}"), highlight=False, soft_wrap=True)


class JobClock:
    """The time left to a job made of named parts of known expected durations (seconds): the expected time
    of the parts not done (those under way less their time so far), scaled by how the parts done compare with
    their expectation (a slower machine, or a loaded one, scales every part alike). With ``lanes`` parts run at a
    time, that work is shared among the lanes, and the time left is never less than the longest part left."""

    def __init__(self, expected: dict[str, float], clock: Callable[[], float] = time.monotonic,
                 lanes: int = 1) -> None:
        self.expected, self.clock, self.lanes = dict(expected), clock, max(1, lanes)
        self.left = list(expected)  # parts not done, in order
        self.observed = 0.0  # seconds the finished parts took
        self.expected_done = 0.0  # what the finished parts were expected to take
        self.running: dict[str, float] = {}  # parts under way -> when each started
        self.job_start = clock()

    def start(self, name: str) -> None:
        self.running[name] = self.clock()

    def finish(self, name: str, seconds: float | None) -> None:
        """``name`` is done, after ``seconds`` (None: reused, it took no time and says nothing of speed)."""
        if name in self.left:
            self.left.remove(name)
        if seconds is not None and self.expected.get(name, 0) > 0:
            self.observed += seconds
            self.expected_done += self.expected[name]
        self.running.pop(name, None)

    def elapsed(self) -> float:
        return self.clock() - self.job_start

    def eta(self) -> float:
        scale = self.observed / self.expected_done if self.expected_done > 0 else 1.0
        now = self.clock()
        left = {n: self.expected.get(n, 0.0) for n in self.left}
        for name, since in self.running.items():
            if name in left:
                left[name] = max(0.0, left[name] - (now - since) / (scale if scale > 0 else 1.0))
        return max(sum(left.values()) / self.lanes, max(left.values(), default=0.0)) * scale


class LineProgress:
    """Progress lines for a loop of ``total`` steps written to ``console``: one every ``every`` seconds and
    one at the end, each with the steps done, the time spent and the time left (from the rate so far)."""

    def __init__(self, console: Console, what: str, every: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.what, self.every, self.clock = console, what, every, clock
        self.start = self.last = clock()

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and now - self.last < self.every:
            return
        self.last = now
        spent = now - self.start
        left = spent / done * (total - done) if done else None
        log_line(self.console, f"{self.what} {done}/{total} · {duration(spent)} spent · {duration(left)} left")
