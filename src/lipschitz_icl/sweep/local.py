"""``--workers 1``: a sweep's batches trained in the driver's process, one after the other, without Dask;
the runs that stopped are stored together every FLUSH_S seconds (``LIPSCHITZ_ICL_FLUSH_S``). Many runs stored at
once make two results files, encoded at the same time by this thread and a helper thread (NumPy, Arrow and
hashlib release the GIL: a second core does half the work). Encoding while the batch trains was tried: the
helper thread then contends for the GIL with the step loop's many small torch calls, and the sweep got slower."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..config import Config
from ..errors import UserInputError
from ..interrupts import deferred_signals, interrupt_latch
from ..limits import env_number
from ..threads import cores, single_threaded_torch
from .spec import Point
from .worker import Keep, encode_pairs, execute_batch

# a batch's results, [(point, result)], stored together; on Dask also their metrics and params already encoded
# as a results file (``results.encode_batch``) when the task was asked to
OnResult = Callable[..., None]
FailedResult = Callable[[Point, str], dict[str, Any]]  # a point's result as failed, and why
FLUSH_S = 2.0  # runs that stopped are stored at least this often
FLUSH_ENV = "LIPSCHITZ_ICL_FLUSH_S"  # overrides FLUSH_S (0: store each run the step after it stopped)
SPLIT_RUNS = 128  # runs stored at once from which two results files are encoded at the same time


def run_in_process(batches: Iterable[list[Point]], on_result: OnResult, keep: Keep,
                   every: float = FLUSH_S, encode: bool = True, idle: Callable[[], None] | None = None) -> None:
    """``--workers 1``: every batch in this process, one after the other, without Dask. Runs that stopped are
    stored together at most FLUSH_S seconds after they stopped, at the end of each batch, and when Ctrl-C
    stops it; ``encode``: results files (of what ``keep`` keeps) encoded here, two at once for many runs (else
    ``on_result`` stores them itself: run directories); ``idle()`` after each step that stores nothing."""
    with single_threaded_torch(), interrupt_latch() as check_interrupt:  # same numbers as on the workers
        for points in batches:
            check_interrupt()  # a Ctrl-C that some library swallowed while the last batch was written
            pending: list[tuple[Point, dict[str, Any]]] = []
            statuses: list[str | None] = []
            last = [time.monotonic()]

            def stopped(pos: int, result: dict[str, Any], points: list[Point] = points,
                        pending: list = pending, statuses: list = statuses) -> None:
                pending.append((points[pos], result))
                statuses.append(result["summary"].get("status"))

            def tick(pending: list = pending, last: list = last, every: float = every) -> None:
                if pending and time.monotonic() - last[0] >= every:
                    _flush(on_result, pending, keep.curves if encode else None)
                    last[0] = time.monotonic()
                elif idle is not None:
                    idle()

            try:
                execute_batch([in_process_config(p.config) for p in points], stopped, keep.params, tick,
                              [p.config_hash for p in points])
            finally:
                _flush(on_result, pending, keep.curves if encode else None)
            if "interrupted" in statuses:  # Ctrl-C inside the training loop
                raise KeyboardInterrupt


def in_process_config(cfg: Config) -> Config | dict[str, Any]:
    """What an in-process batch gets: the config itself (validated once already), or as a mapping validated
    again where that checks something (a feature file's digest, against a file changed since the spec was read)."""
    return cfg.model_dump(mode="json") if cfg.features.kind == "file" else cfg


def flush_every() -> float:
    """FLUSH_S, or the seconds LIPSCHITZ_ICL_FLUSH_S gives (a number >= 0; unset or empty: FLUSH_S; anything
    else: a one-line error). Read before a sweep writes anything."""
    given = env_number(FLUSH_ENV)
    if given is None:
        return FLUSH_S
    text, value = given
    if not value >= 0:  # NaN too
        raise UserInputError(f"{FLUSH_ENV}={text!r}: expected seconds >= 0 (how often a sweep in this process "
                             "stores the runs that stopped)")
    return value


def _flush(on_result: OnResult, pending: list[tuple[Point, dict[str, Any]]], encode: str | None = None) -> None:
    """Store the pending results (Ctrl-C waits until they are) and empty the list; ``encode`` (the curves to keep,
    ``results.CURVES``): as results files encoded here, two at once (this thread and a helper) for SPLIT_RUNS runs
    or more on more than one core."""
    with deferred_signals():
        if encode and len(pending) >= SPLIT_RUNS and cores() > 1:
            half = len(pending) // 2
            first, second = pending[:half], pending[half:]
            with ThreadPoolExecutor(1, thread_name_prefix="lipschitz-icl-encode") as helper:
                encoding = helper.submit(encode_pairs, first, encode)
                encoded = encode_pairs(second, encode)
                on_result(first, encoding.result())
            del pending[:half]
            on_result(second, encoded)
        elif pending:  # one file: ``on_result`` encodes it (or writes run directories)
            on_result(list(pending))
        pending.clear()
