"""Engines that evaluate the population loss: ``kernel`` (exact, K x K) and ``sampled`` (prompts).

Importing this package registers both (``engines.registry``)."""

from ..rng import make_generator
from .base import DEVICE_NAMES, Engine, EngineBatch, StepOutput, device_option, resolve_device
from .kernel import KernelEngine, kernel_loss
from .registry import batchable, build_engine, engine_class, engine_names, register_engine
from .sampled import SampledEngine, draw_prompts

__all__ = [
    "DEVICE_NAMES", "Engine", "EngineBatch", "KernelEngine", "SampledEngine", "StepOutput", "batchable", "build_engine",
    "device_option", "draw_prompts", "engine_class", "engine_names", "kernel_loss", "make_generator", "register_engine",
    "resolve_device",
]
