"""The built-in benchmark sections, one file each, registered on import (report order: ``order``)."""

from . import batched, evaluate, memory, reproduce, scaling, step_floor, step_time, sweep_batched  # noqa: F401  (registration)
