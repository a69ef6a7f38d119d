"""lipschitz-icl: in-context learning of nonlinear L-Lipschitz regression with softmax attention."""

__version__ = "0.1.0"

from .api import Run, load_run, run, write_run  # noqa: E402
from .config import Config, default_config, load_config  # noqa: E402
from .tasks import TaskClass, register_task, task_names  # noqa: E402

__all__ = [
    "Config", "Run", "TaskClass", "__version__", "default_config", "load_config", "load_run",
    "register_task", "run", "task_names", "write_run",
]
