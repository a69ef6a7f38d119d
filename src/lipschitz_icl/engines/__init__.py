"""Engines that evaluate the population loss: ``kernel`` (exact, K x K) and ``sampled`` (prompts)."""

from ..rng import make_generator
from .base import Engine, StepOutput, resolve_device
from .build import build_engine
from .kernel import KernelEngine, kernel_loss
from .sampled import SampledEngine, draw_prompts

__all__ = [
    "Engine", "KernelEngine", "SampledEngine", "StepOutput", "build_engine", "draw_prompts",
    "kernel_loss", "make_generator", "resolve_device",
]
