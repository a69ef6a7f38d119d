"""Linear attention on in-context linear regression with Gaussian inputs: the neighbours' setting.

``task`` (prompts and their moments), ``forms`` (merged and separate key-query heads, preconditioned GD
layers), ``engines`` (the exact population engine and the sampled one, one registry), ``train`` (gradient
descent, loss curves), ``closed_forms`` (the optimum, plateau losses, errors under a shift) and ``tokens``
(the residual-stream layer on tokens [x; y], which the reduced forms equal)."""

from .closed_forms import optimal_error, optimal_gamma, plateau_losses, single_error
from .engines import ExactEngine, SampledEngine, linear_engine, linear_engine_names, register_linear_engine
from .forms import FORMS, Form, gamma_of, gamma_predict, init_params, predict
from .task import GaussianTask, pool_of, white
from .train import LinearRun, train_linear

__all__ = ["FORMS", "ExactEngine", "Form", "GaussianTask", "LinearRun", "SampledEngine", "gamma_of", "gamma_predict",
           "init_params", "linear_engine", "linear_engine_names", "optimal_error", "optimal_gamma",
           "plateau_losses", "pool_of", "predict", "register_linear_engine", "single_error", "train_linear",
           "white"]
