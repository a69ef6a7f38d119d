"""Sweeps: many runs from a spec (grid, zip, seeds), executed on this machine's cores or on Dask, indexed in SQLite.

    >>> from lipschitz_icl.sweep import run_sweep, run_configs, load_index
    >>> rows = run_sweep("configs/sweeps/l_sweep.yaml", out="sweeps/l_sweep", workers=2)
    >>> rows[["task.L", "seed", "status", "T_eps"]]
    >>> load_index("sweeps/l_sweep")          # the whole index, any time, even mid-sweep
    >>> load_metrics("sweeps/l_sweep")        # every run's metrics, one tidy table (name, step, metric, ...)
    >>> load_runs("sweeps/l_sweep")[0].attention()   # the runs as li.Run objects
    >>> print(plan_cluster("slurm", {"queue": "cpu"}, jobs=4).job_script())   # what --cluster slurm submits
    >>> run_sweep("configs/sweeps/l_sweep.yaml", cluster="slurm", cluster_options={"queue": "cpu"}, jobs=4)

See docs/SWEEPS.md for the spec format, the store layout and the index schema.
"""

from .execute import default_workers, is_running, point_statuses, run_configs, run_sweep
from .index import FINISHED, INDEX_FILE, Index, load_index
from .jobqueue import ClusterPlan, plan_cluster
from .results import load_metrics, load_runs
from .spec import MAX_POINTS, Point, Sweep, SweepSpec, load_sweep, parse_range
from .worker import execute_config

__all__ = [
    "FINISHED", "INDEX_FILE", "MAX_POINTS", "ClusterPlan", "Index", "Point", "Sweep", "SweepSpec", "default_workers",
    "execute_config", "is_running", "load_index", "load_metrics", "load_runs", "load_sweep", "parse_range",
    "plan_cluster", "point_statuses", "run_configs", "run_sweep",
]
