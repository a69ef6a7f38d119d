"""The records of a batch of runs as they train: one row of arrays per run, written for every run
recorded at a step with one assignment per array, handed to the run's Recorder as one block when
the run ends (``Recorder.record_block``): no Python work per run and step.

Arrays are held in chunks of CHUNK records per run along the record axis; a run past its last chunk
gets a new one (nothing copied: growing by doubling copied everything held and was ~5% of a sweep).
"""

from __future__ import annotations

import numpy as np

from .recorder import Recorder

CHUNK = 64  # records per run in one chunk of arrays


class BatchRecords:
    """Records of R runs, per chunk: steps (R, CHUNK), scalars (R, CHUNK, C) [loss, *names], attention and
    scores (R, CHUNK, K, K)."""

    def __init__(self, R: int, K: int, most: int) -> None:
        self.R, self.K = R, K
        self.size = min(most, CHUNK)  # records per run in a chunk (``most``: a run's records at most)
        self.count = np.zeros(R, dtype=np.int64)  # records held per run
        self.names: tuple[str, ...] | None = None  # the extras' names, fixed at the first record
        self.chunks: list[dict[str, np.ndarray]] = []

    def _chunk(self, c: int, width: int) -> dict[str, np.ndarray]:
        while len(self.chunks) <= c:
            R, S, K = self.R, self.size, self.K
            self.chunks.append({"steps": np.zeros((R, S), dtype=np.int64), "scalars": np.zeros((R, S, width)),
                                "attn": np.zeros((R, S, K, K)), "scores": np.zeros((R, S, K, K))})
        return self.chunks[c]

    def add(self, runs: np.ndarray, step: int, scalars: np.ndarray, names: tuple[str, ...], attn: np.ndarray,
            scores: np.ndarray) -> None:
        """Record ``runs`` at ``step``: scalars (r, C) [loss, *extras named ``names``], attn and scores (r, K, K)."""
        if self.names is None:
            self.names = names
        elif names != self.names:
            raise ValueError(f"a batch records one set of metrics (had {self.names}, got {names})")
        which, slot = np.divmod(self.count[runs], self.size)
        hit = np.unique(which).tolist()  # one chunk, or two where some runs just filled theirs
        for c in hit:
            mine = slice(None) if len(hit) == 1 else which == c
            chunk = self._chunk(c, scalars.shape[1])
            at = (runs[mine], slot[mine])
            chunk["steps"][at] = step
            chunk["scalars"][at] = scalars[mine]
            chunk["attn"][at] = attn[mine]
            chunk["scores"][at] = scores[mine]
        self.count[runs] += 1

    def hand_over(self, run: int, recorder: Recorder) -> None:
        """Give run ``run``'s records to its recorder (copies), as one block."""
        T = int(self.count[run])
        if T == 0 or self.names is None:
            return
        used = self.chunks[: -(-T // self.size)]
        held = [(chunk, min(self.size, T - c * self.size)) for c, chunk in enumerate(used)]
        steps, scalars, attn, scores = (np.concatenate([chunk[name][run, :n] for chunk, n in held])
                                        for name in ("steps", "scalars", "attn", "scores"))
        recorder.record_block(steps, scalars, self.names, attn, scores)
        self.count[run] = 0
