"""Engines that evaluate the population loss: ``kernel`` (exact, K x K) and ``sampled`` (prompts).

Importing this package registers both (``engines.registry``)."""

from ..rng import make_generator
from .base import DEVICE_NAMES, Engine, EngineBatch, StepBatch, StepOutput, device_option, resolve_device
from .kernel import KernelEngine, kernel_loss
from .prompts import draw_prompts
from .registry import batchable, build_engine, engine_class, engine_names, register_engine, stackable
from .sampled import SampledEngine

__all__ = [
    "DEVICE_NAMES", "Engine", "EngineBatch", "KernelEngine", "SampledEngine", "StepBatch", "StepOutput", "batchable",
    "build_engine", "device_option", "draw_prompts", "engine_class", "engine_names", "kernel_loss", "make_generator",
    "register_engine", "resolve_device", "stackable",
]
