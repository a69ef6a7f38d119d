"""Which points of a sweep train together: ``plan_batches`` cuts them into batches of compatible points, each of at
most ``--batch`` (by default sized by memory, ``auto_batch``), the points of one kernel spec in one batch."""

from __future__ import annotations

from collections.abc import Sequence

from ..config import Config
from ..engines.kernel_spec import LOOP_ONLY
from .expansion import Point, batch_group

DEFAULT_BATCH = None  # runs per batch (``--batch``); None: sized by memory (``auto_batch``)
BATCH_MEMORY = 64 * 2**20  # bytes of recorded metrics a batch may hold before it is stored
MAX_BATCH = 512


def auto_batch(cfg: Config) -> int:
    """Runs per batch when ``--batch`` is not given: as many as keep the batch's recorded metrics (held until
    the batch is stored) under BATCH_MEMORY, between 8 and MAX_BATCH; ~40 bytes per tidy row."""
    K = cfg.features.K or 1
    rows = (cfg.train.steps // cfg.train.log_every + 2) * (2 * K * K + 16)
    return max(8, min(MAX_BATCH, BATCH_MEMORY // (40 * rows)))


def plan_batches(todo: Sequence[Point], batch: int | None, workers: int = 1) -> list[list[Point]]:
    """The points as batches of at most ``batch`` compatible points (None: ``auto_batch`` of each group;
    points that cannot be batched: one each), those of one set-up together (``_shared_setup``), in the order of
    their first point. On Dask (``workers`` > 1;
    a batch's results come back when its task ends) a group is cut into at least 4 batches per worker where it has the
    points, so that every worker gets work and results arrive in several pieces (runs that take their steps together:
    one batch per worker, ``_pieces``)."""
    groups: dict[tuple, list[Point]] = {}
    batches: list[list[Point]] = []
    for point in todo:
        key = point.group or batch_group(point.config)
        if key == ("alone",) or batch == 1:
            batches.append([point])
        else:
            groups.setdefault(key, []).append(point)
    for key, members in groups.items():
        members.sort(key=_shared_setup)  # stable: spec order within each set-up
        most = auto_batch(members[0].config) if batch is None else batch
        size = max(1, min(most, -(-len(members) // _pieces(key, workers))))
        batches.extend(members[i : i + size] for i in range(0, len(members), size))
    first = {p.config_hash: n for n, p in enumerate(todo)}
    return sorted(batches, key=lambda b: first[b[0].config_hash])


def _pieces(key: tuple, workers: int) -> int:
    """Batches a group is cut into at least, where it has the points: 4 per worker for a kernel group on Dask (every
    worker busy, results in pieces); one per worker for runs that take their steps together (``("stacked", ...)``:
    a run of them stepped alone loses what stacking saves, 1.3-1.9x, and such runs end together)."""
    if workers <= 1:
        return 1
    return workers if key[0] == "stacked" else 4 * workers


def _shared_setup(point: Point) -> tuple:
    """The point's axis values but those only the training loop reads (``kernel_spec.LOOP_ONLY``: eta, budget,
    epsilon, logging): points with equal ones share their kernel spec, so ``plan_batches`` puts them in one batch,
    where it is built once (a grid of step sizes over seeds: each seed's spec once, not once per batch)."""
    return tuple((key, repr(value)) for key, value in point.axes.items() if not _loop_only(key))


def _loop_only(key: str) -> bool:
    section, _, rest = key.partition(".")
    read = LOOP_ONLY.get(section)
    return read is True or (isinstance(read, set) and rest in read)
