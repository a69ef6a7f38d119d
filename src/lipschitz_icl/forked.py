"""Work items side by side, each in a process forked from this one (``run_forked``): what ``reproduce --jobs N`` uses
to run N experiments at a time, and a local sweep its batches. A fork inherits the imported registries, plugins and
the caller's context, so nothing is pickled on the way in; each item's result comes back through a pipe (pickled).
Not torch tensors: torch hands their storage over through shared memory that the child takes with it when it ends
(send arrays).

A child runs in a process group of its own, so Ctrl-C in the terminal reaches this process only; this process then
ends its children (SIGTERM) and raises ``ForkedInterrupted`` with the time each unfinished item had run. On Linux a
child also gets SIGTERM when this process dies (``PR_SET_PDEATHSIG``), so a killed job leaves no work running. A
child that dies before it answers (killed, out of memory) is the item's result as ``ChildDied``. A descriptor named
by ``not_inherited`` (a sweep directory's lock) is closed in each child first.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

T = TypeVar("T")
Arrays = dict[str, tuple[np.ndarray, str]]  # tensors as they cross a pipe: (NumPy array, device) each
PR_SET_PDEATHSIG = 1  # prctl option: the signal a process gets when its parent dies (Linux)
IDLE_S = 0.5  # run_forked's idle() is called this often while it waits
_NOT_INHERITED: set[int] = set()  # file descriptors a forked child closes first (not_inherited)


class ChildDied(RuntimeError):
    """The process of an item ended without answering (``exitcode`` says how)."""

    def __init__(self, exitcode: int | None) -> None:
        super().__init__(f"its process ended without a result (exit code {exitcode})")
        self.exitcode = exitcode


class ForkedInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM while items ran: ``elapsed`` maps each unfinished item's position to its seconds so far."""

    def __init__(self, elapsed: dict[int, float]) -> None:
        super().__init__("SIGINT")
        self.elapsed = elapsed


def fork_available() -> bool:
    """Whether this platform can fork (Linux, macOS); elsewhere items run one after the other."""
    return "fork" in mp.get_all_start_methods()


def single_threaded() -> bool:
    """Whether this process runs no thread but the main one: only then is a fork safe from the locks of other
    threads (a fork copies a lock another thread holds, torch's random generator's say, and the child that takes
    it waits forever). Jupyter's kernel and threaded programs are not."""
    return threading.active_count() == 1


def run_forked(items: Sequence[T], work: Callable[[T, Callable[[Any], None]], Any], jobs: int,
               started: Callable[[int], None], answered: Callable[[int, Any, float], None],
               ticked: Callable[[int, Any], None] | None = None, idle: Callable[[], None] | None = None) -> None:
    """``work(item, tick)`` for every item, at most ``jobs`` at a time, each in a forked process: ``started(position)``
    as one starts, ``ticked(position, payload)`` for each ``tick(payload)`` the work sends on its way (progress), and
    ``answered(position, result or the exception it raised or ChildDied, seconds)`` as one ends, in the order they
    end; ``idle()`` every IDLE_S seconds while nothing arrives (a progress display's clock). ``items`` may be a list
    that ``answered`` or ``ticked`` appends to: the new items run too. Ctrl-C ends the children and raises
    ForkedInterrupted."""
    fork = mp.get_context("fork")
    waiting, seen = list(range(len(items))), len(items)  # seen: the items known so far (a list may grow)
    running: dict[Any, tuple[int, Any, float]] = {}  # the pipe's reading end -> (position, process, start)
    gc.freeze()  # the children's collections skip the heap they inherit (no traversal, no copy-on-write of it)
    try:
        while waiting or running or len(items) > seen:
            waiting.extend(range(seen, len(items)))
            seen = len(items)
            while waiting and len(running) < jobs:
                pos = waiting.pop(0)
                reader, writer = fork.Pipe(duplex=False)
                # the child closes its copies of the reading ends (its own and its siblings'): with the parent gone, a
                # write to a full pipe then fails (EPIPE) instead of waiting forever where no PR_SET_PDEATHSIG ends it
                readers = [*running, reader]
                process = fork.Process(target=_child, args=(work, items[pos], writer, readers))  # not daemonic
                started(pos)
                with _signals_held():  # a SIGTERM to the process group must not reach the child's copy of our handlers
                    process.start()
                    writer.close()
                    # recorded before the held signals come in: a Ctrl-C right after the fork ends this child too
                    running[reader] = (pos, process, time.perf_counter())
            ready = set(mp.connection.wait([*running, *(p.sentinel for _, p, _ in running.values())],
                                           timeout=None if idle is None else IDLE_S))
            if not ready and idle is not None:
                idle()
            for reader in [r for r, (_, p, _) in running.items() if r in ready or p.sentinel in ready]:
                pos, process, start = running[reader]
                ended, outcome = _drain(reader, process, lambda payload, at=pos: ticked and ticked(at, payload))
                if ended:
                    del running[reader]
                    answered(pos, outcome, time.perf_counter() - start)
    except KeyboardInterrupt:
        elapsed = {pos: time.perf_counter() - start for pos, _, start in running.values()}
        _end([p for _, p, _ in running.values()])
        raise ForkedInterrupted(elapsed) from None
    except BaseException:
        _end([p for _, p, _ in running.values()])
        raise
    finally:
        # collectable again here, whoever froze it (a forked child that forks in turn would otherwise keep for good
        # whatever became garbage after this call: only the garbage of the moment can be frozen safely)
        gc.unfreeze()


class ForkedCall:
    """``work(item)`` computed in a process forked from this one while this one goes on (``run_forked``'s child: a
    process group of its own, SIGTERM when this process dies): ``result()`` waits for its answer and raises what it
    raised (ChildDied: it ended without one); ``end()`` stops it if it still runs (call it in a ``finally``)."""

    def __init__(self, work: Callable[[T], Any], item: T) -> None:
        fork = mp.get_context("fork")
        self.reader, writer = fork.Pipe(duplex=False)
        self.process = fork.Process(target=_child, args=(lambda it, tick: work(it), item, writer, [self.reader]))
        with _signals_held():
            self.process.start()
            writer.close()

    def result(self) -> Any:
        try:
            kind, value = self.reader.recv()
        except (EOFError, OSError):  # its end closed without an answer: it died
            _reap(self.reader, self.process)
            raise ChildDied(self.process.exitcode) from None
        _reap(self.reader, self.process)
        if kind == "error":
            raise value
        return value

    def end(self) -> None:
        _end([self.process])
        self.reader.close()


def arrays_of(tensors: dict[str, torch.Tensor] | None) -> Arrays | None:
    """Tensors (a run's parameters) as they cross a pipe: NumPy arrays with their devices (a tensor itself would
    travel through shared memory that the child's process takes with it when it ends)."""
    return None if tensors is None else {k: (v.detach().cpu().numpy(), str(v.device)) for k, v in tensors.items()}


def tensors_of(arrays: Arrays | None) -> dict[str, torch.Tensor] | None:
    """The tensors ``arrays_of`` sent, on their devices again."""
    return None if arrays is None else {k: torch.from_numpy(a).to(dev) for k, (a, dev) in arrays.items()}


def _drain(reader: Any, process: Any, on_tick: Callable[[Any], Any]) -> tuple[bool, Any]:
    """What the child sent so far: its ticks to ``on_tick``; (True, its answer: a result or an exception) once it
    answered, (True, ChildDied) when it ended without one, else (False, None)."""
    while True:
        try:
            if not reader.poll():
                break
            kind, value = reader.recv()
        except (EOFError, OSError):  # the child's end closed: it ended
            _reap(reader, process)
            return True, ChildDied(process.exitcode)
        if kind != "tick":
            _reap(reader, process)
            return True, value
        on_tick(value)  # what it raises (a disk full while storing) is the caller's: run_forked ends the children
    if process.is_alive():
        return False, None
    _reap(reader, process)
    return True, ChildDied(process.exitcode)


def _reap(reader: Any, process: Any) -> None:
    reader.close()
    process.join()


@contextlib.contextmanager
def not_inherited(fd: int) -> Iterator[None]:
    """Children forked within the block close their copy of ``fd`` first: a lock held through it (``flock``, which a
    fork shares) is then held by this process alone, and ends with it, not with the last child to end."""
    _NOT_INHERITED.add(fd)
    try:
        yield
    finally:
        _NOT_INHERITED.discard(fd)


def _child(work: Callable[[Any, Callable[[Any], None]], Any], item: Any, writer: Any, readers: list[Any]) -> None:
    for reader in readers:
        reader.close()
    for fd in list(_NOT_INHERITED):
        with contextlib.suppress(OSError):
            os.close(fd)
    _detach()
    try:
        answer = ("result", work(item, lambda payload: writer.send(("tick", payload))))
    except BaseException as e:  # noqa: BLE001 - handed to the parent, which decides
        answer = ("error", e)
    try:
        writer.send(answer)
    except Exception as e:  # noqa: BLE001 - an answer that does not pickle
        writer.send(("error", RuntimeError(f"the result could not be sent back ({type(e).__name__}: {e})")))
    writer.close()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (delivered when the block ends) while a child is forked: the child starts with
    them blocked and the parent's handlers, and unblocks them once it has its own (``_detach``). A signal sent to
    the whole process group at that moment so ends the child quietly instead of raising KeyboardInterrupt in
    Python's at-fork hooks (a traceback on the terminal)."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if previous is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _detach() -> None:
    """A process group of its own (the terminal's Ctrl-C reaches the parent only), the default SIGTERM and SIGINT
    handlers, and on Linux SIGTERM when the parent dies; then the signals held while it was forked are let in."""
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() == 1:  # the parent died before prctl: nobody to answer
            os._exit(1)


def _end(processes: list[Any]) -> None:
    """Terminate the children still running and wait for them."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=10)
