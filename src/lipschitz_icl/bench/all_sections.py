"""The built-in benchmark sections, in report order."""

from . import sec_batch, sec_memory, sec_reproduce, sec_scaling, sec_steps  # noqa: F401  (registration)
from .extras import register_defaults

register_defaults()
