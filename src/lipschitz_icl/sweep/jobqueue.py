"""A sweep's Dask workers as SLURM or PBS jobs, through dask-jobqueue (``--cluster slurm|pbs``).

The driver (this process) runs the Dask scheduler, as with the embedded ``LocalCluster``; dask-jobqueue
submits ``jobs`` batch jobs (``sbatch`` / ``qsub``), each starting ``processes`` single-threaded Dask worker
processes that connect back to it. The workers get the embedded cluster's set-up: the preload module
``lipschitz_icl.sweep.preload`` (torch and the package imported before the first task), one thread each
(``run_batch_task`` sets torch to one thread), and a scheduler that records a point whose worker died
``failed`` at once (``allowed-failures: 0``), so a cluster run gives the numbers of a local one.

``plan_cluster`` checks every option before anything runs (a one-line ``UserInputError`` naming the option
and what is allowed); ``ClusterPlan.job_script`` is what ``--dry-run`` prints: it starts a scheduler to put
its address in the script, and submits nothing (no ``sbatch`` needed).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import shutil
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserInputError
from .dask_backend import connect_scheduler, quiet_logs

KINDS = ("slurm", "pbs")  # --cluster values besides local
PRELOAD = "lipschitz_icl.sweep.preload"  # what the embedded cluster's fork server imports (dask_backend)
MEMORY_PER_WORKER_GB = 2  # default memory of a job: this much per worker process
DEFAULT_WALLTIME = "01:00:00"
INSTALL = "pip install 'lipschitz-icl[cluster]' (or pip install dask-jobqueue)"
_WALLTIME = re.compile(r"^(\d+-\d+(:\d\d){0,2}|\d+(:\d\d){0,2})$")  # minutes, [D-]HH[:MM[:SS]], MM:SS
_LINE = re.compile(r"^[^\x00-\x1f\x7f]+$")  # one line of printable text: it goes into a job script


def _count(value: Any) -> int:
    number = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError
    return number


def _seconds(value: Any) -> float:
    number = float(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int | float) or not 0 < number < math.inf:
        raise ValueError
    return float(number)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not _LINE.match(value):
        raise ValueError
    return value


def _memory(value: Any) -> str:
    from dask.utils import parse_bytes  # dask: a dependency, imported when a sweep uses Dask

    text = _text(value)
    if parse_bytes(text) <= 0:  # raises ValueError on 'lots'
        raise ValueError
    return text


def _walltime(value: Any) -> str:
    if not _WALLTIME.match(_text(value)):
        raise ValueError
    return value


Parse = Callable[[Any], Any]
COUNT, SECONDS, TEXT = (_count, "a whole number >= 1"), (_seconds, "seconds > 0"), (_text, "one line of text")
MEMORY = (_memory, "an amount such as 4GB or 500MiB")
# every key --cluster-option takes: (parser, what is allowed); lists take one item per --cluster-option
OPTIONS: dict[str, tuple[Parse, str]] = {
    "cores": COUNT, "processes": COUNT, "memory": MEMORY,
    "walltime": (_walltime, "a time such as 01:00:00, 90 (minutes) or 2-00:00:00"),
    "queue": TEXT, "account": TEXT, "job_name": TEXT, "interface": TEXT, "local_directory": TEXT,
    "log_directory": TEXT, "python": TEXT, "shebang": TEXT, "death_timeout": SECONDS,
}
LISTS = ("job_extra_directives", "job_script_prologue", "job_directives_skip", "worker_extra_args")
ONLY: dict[str, dict[str, tuple[Parse, str]]] = {  # keys of one scheduler's jobs only
    "slurm": {"job_cpu": COUNT, "job_mem": MEMORY}, "pbs": {"resource_spec": TEXT},
}


def allowed_keys(kind: str) -> list[str]:
    """The keys ``--cluster-option`` takes for ``--cluster kind``."""
    return sorted([*OPTIONS, *LISTS, *ONLY[kind]])


@dataclass(frozen=True)
class ClusterPlan:
    """A checked ``--cluster slurm|pbs``: ``options`` are the keywords of the dask-jobqueue cluster (defaults
    filled in, the preload added), ``jobs`` the batch jobs to submit (at most one worker per run)."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    jobs: int = 1

    @property
    def processes(self) -> int:
        """Dask worker processes per job (one thread each)."""
        return self.options["processes"]

    @property
    def submit_command(self) -> str:
        return "sbatch" if self.kind == "slurm" else "qsub"

    def jobs_for(self, runs: int) -> int:
        """Jobs to submit for ``runs`` runs: ``jobs``, or fewer where they would give more workers than runs."""
        return max(1, min(self.jobs, -(-runs // self.processes)))

    def start(self) -> tuple[Any, Any]:
        """``(client, cluster)``: the scheduler, started in this process; no job is submitted yet (``submit``)."""
        import dask
        from distributed import Client

        quiet_logs()
        cluster_class = _cluster_class(self.kind)
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):  # as the embedded cluster's
            try:
                cluster = cluster_class(silence_logs=logging.CRITICAL, **self.options)
            except (ValueError, OSError, RuntimeError) as e:  # an interface that is not there, a port in use
                raise UserInputError(f"--cluster {self.kind}: cannot start the Dask scheduler ({_first_line(e)})"
                                     ) from None
        try:
            return Client(cluster), cluster
        except BaseException:
            cluster.close()
            raise

    def job_script(self) -> str:
        """The job script ``sbatch`` / ``qsub`` would be given (``cluster.job_script()``), without submitting it
        (a scheduler is started for a moment, so that its address is in the script)."""
        client, cluster = self.start()
        try:
            return cluster.job_script()
        finally:
            client.close()
            cluster.close()

    def submit(self, client: Any, cluster: Any, runs: int) -> None:
        """Submit ``jobs_for(runs)`` jobs and wait until the first worker joins (Ctrl-C: the jobs are cancelled
        when the cluster closes). A submission the scheduler refuses is a one-line UserInputError."""
        from distributed.core import Status

        try:
            cluster.sync(_scale, cluster, self.jobs_for(runs))
        except RuntimeError as e:  # dask-jobqueue's error quotes the command's stderr
            for job in cluster.workers.values():
                if job.job_id is None:  # refused: marked failed, as the cluster's close expects of a job never started
                    job.status = Status.failed
            raise UserInputError(f"--cluster {self.kind}: {self.submit_command} refused the job "
                                 f"({_stderr_line(str(e))})") from None
        client.wait_for_workers(1)


async def _scale(cluster: Any, jobs: int) -> None:
    """Scale ``cluster`` to ``jobs`` jobs and wait until they are submitted (or cancelled), raising the submit
    command's error: ``scale`` alone only schedules that. Run on the cluster's loop, the ``_correct_state`` task
    started here is the one ``scale``'s callback then joins, so its error is the one awaited.

    The task is shielded: a Ctrl-C cancels what ``sync`` awaits, and a cancelled task would drop the jobs whose
    ``sbatch`` had not yet answered (never recorded, so never cancelled on close, and the close itself failed);
    shielded, the submissions finish, and closing the cluster cancels every job."""
    cluster.scale(jobs=jobs)
    await asyncio.shield(cluster._correct_state())


def check_submit_command(plan: ClusterPlan) -> None:
    """``sbatch`` (``qsub``) must be on PATH for a real run (``--dry-run`` needs neither)."""
    if shutil.which(plan.submit_command) is None:
        raise UserInputError(f"--cluster {plan.kind}: {plan.submit_command} is not on PATH (run the sweep where "
                             f"{plan.kind.upper()} jobs are submitted, e.g. a login node; --dry-run prints the job "
                             "script without it)")


def connect(scheduler: str | None, plan: ClusterPlan | None) -> tuple[Any, Any]:
    """``(client, cluster)`` of a ``scheduler`` address or a cluster ``plan`` (its scheduler started, no job
    submitted yet), else ``(None, None)``: before a sweep writes anything."""
    if scheduler is not None:
        return connect_scheduler(scheduler), None
    if plan is not None:
        check_submit_command(plan)
        return plan.start()
    return None, None


def checked_plan(cluster: str | ClusterPlan, options: Mapping[str, Any] | Sequence[str] | None, jobs: int | None,
                 workers: int | None, scheduler: str | None) -> ClusterPlan | None:
    """``run_sweep``'s ``cluster`` checked (None: local); ``workers`` or a ``scheduler`` with SLURM / PBS is refused."""
    plan = cluster if isinstance(cluster, ClusterPlan) else plan_cluster(cluster, options, jobs)
    for given, name in ((workers, "workers"), (scheduler, "scheduler")):
        if plan is not None and given is not None:
            raise UserInputError(f"{name}= and cluster={plan.kind!r}: give one or the other",
                                 f"--{name} and --cluster {plan.kind}: give one or the other")
    return plan


def _cluster_class(kind: str) -> Any:
    """dask-jobqueue's cluster class for ``kind``. Importing dask-jobqueue 0.9.0 makes Ctrl-C call ``sys.exit()``
    (a SIGINT handler set at import, dask/dask-jobqueue#696, fixed after 0.9.0): the handler is put back, so that
    Ctrl-C still cancels the jobs and exits 130."""
    previous = signal.getsignal(signal.SIGINT)
    try:
        import dask_jobqueue
    except ImportError:
        raise UserInputError(f"--cluster {kind} needs dask-jobqueue, which is not installed: {INSTALL}") from None
    except ValueError:  # its signal.signal outside the main thread
        raise UserInputError(f"--cluster {kind}: dask-jobqueue must first be imported in the main thread (it sets "
                             "a signal handler when imported)") from None
    finally:
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)
    return dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster


def plan_cluster(kind: str, options: Mapping[str, Any] | Sequence[str] | None = None,
                 jobs: int | None = None) -> ClusterPlan | None:
    """Check ``--cluster KIND`` with its ``--cluster-option KEY=VALUE`` strings (or, from Python, a mapping
    of keys to values; a list key takes a list) and ``--jobs``; None for ``local``. Every problem is one
    UserInputError naming the option and what is allowed, before anything runs."""
    if kind == "local":
        for given, name in ((options, "--cluster-option"), (jobs, "--jobs")):
            if given:
                raise UserInputError(f"{name}: only with --cluster slurm or pbs (got --cluster local)")
        return None
    if kind not in KINDS:
        raise UserInputError(f"--cluster {kind}: expected one of local, {', '.join(KINDS)}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise UserInputError(f"--jobs must be a whole number >= 1 (got {jobs!r})")
    _cluster_class(kind)  # dask-jobqueue is installed
    given = _parse(kind, options or {})
    cores = given.pop("cores", 1)
    processes = given.pop("processes", cores)
    if cores % processes:
        raise UserInputError(f"--cluster-option processes={processes}: must divide cores={cores} (each worker "
                             "process gets cores/processes threads; the default, processes=cores, gives one)")
    settings = {"cores": cores, "processes": processes, "memory": f"{MEMORY_PER_WORKER_GB * processes}GB",
                "walltime": DEFAULT_WALLTIME, **given}
    settings["worker_extra_args"] = ["--preload", PRELOAD, *given.get("worker_extra_args", [])]
    return ClusterPlan(kind, settings, 1 if jobs is None else jobs)


def _parse(kind: str, options: Mapping[str, Any] | Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (the last of a key wins; a list key collects them) or a mapping, parsed and checked."""
    pairs: list[tuple[str, Any, str]] = []  # (key, value, how the user wrote it)
    if isinstance(options, Mapping):
        pairs = [(str(k), v, f"cluster_options[{k!r}]") for k, v in options.items()]
    else:
        for text in options:
            key, sep, value = str(text).partition("=")
            if not sep or not key.strip():
                raise UserInputError(f"--cluster-option {text}: expected KEY=VALUE (e.g. memory=8GB)")
            pairs.append((key.strip(), value, f"--cluster-option {text}"))
    specs = {**OPTIONS, **ONLY[kind]}
    parsed: dict[str, Any] = {}
    for key, value, where in pairs:
        name = key.replace("-", "_")
        if name not in specs and name not in LISTS:
            raise UserInputError(f"{where}: unknown key {key!r} for --cluster {kind} (allowed: "
                                 f"{', '.join(allowed_keys(kind))})")
        if name in LISTS:
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(i, str) and _LINE.match(i) for i in items):
                raise UserInputError(f"{where}: expected one line of text per item (a list key: give it once per "
                                     "item)")
            parsed.setdefault(name, []).extend(items)
            continue
        parse, allowed = specs[name]
        try:
            parsed[name] = parse(value)
        except (ValueError, TypeError):
            raise UserInputError(f"{where}: expected {allowed} (got {value!r})") from None
    return parsed


def _first_line(error: BaseException) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)


def _stderr_line(text: str) -> str:
    """The first line of what the submit command wrote to stderr (dask-jobqueue's error quotes it)."""
    _, _, stderr = text.partition("stderr:")
    return _first_line(RuntimeError(stderr)) if stderr.strip() else _first_line(RuntimeError(text))
