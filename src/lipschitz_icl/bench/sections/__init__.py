"""The built-in benchmark sections, one file each, registered on import (report order: ``order``)."""

from . import (  # noqa: F401  (registration)
    batched,
    evaluate,
    memory,
    reproduce,
    scaling,
    stacked,
    startup,
    step_floor,
    step_time,
    sweep_batched,
    sweep_scale,
)
