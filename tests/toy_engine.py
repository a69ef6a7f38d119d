"""An engine registered from outside the package, in one file, as a user would add one.

The kernel engine's population loss with the mean-field counts c = N p, differentiated by
autograd in Q (d x d) instead of in closed form: a second implementation of an objective the
toolkit already has, so tests can check it against the built-in engine.
"""

import torch

from lipschitz_icl.engines import Engine, StepOutput, kernel_loss, register_engine
from lipschitz_icl.errors import ConfigError

BUFFER_PER_TOKEN = 2**25  # a pretend scratch buffer, so that tests can see the memory check ask the engine


@register_engine
class MeanFieldAutograd(Engine):
    name = "test_meanfield"

    @classmethod
    def from_problem(cls, problem):
        return cls(problem)

    @classmethod
    def check_config(cls, cfg):
        if cfg.model.kind != "reduced":
            raise ConfigError("model.kind", f"engine.kind=test_meanfield supports reduced only (got {cfg.model.kind})")

    @classmethod
    def working_set(cls, cfg, tasks):
        return [("prompt.N", f"the toy buffer (N={cfg.prompt.N})", cfg.prompt.N * BUFFER_PER_TOKEN)]

    def __init__(self, problem):
        fs = problem.features
        self.V, self.p = fs.V.double(), fs.p.double()
        self.counts = (problem.config.prompt.N * self.p).unsqueeze(0)  # mean field: c = N p
        sigma = problem.kernel.sigma.double()
        self.sigma = 0.5 * (sigma + sigma.T)
        self.Q = torch.zeros(fs.d, fs.d, dtype=torch.float64, requires_grad=True)  # Q^(0) = 0

    def _loss(self, Q):
        return kernel_loss(self.V.T @ Q.T @ self.V, self.counts, self.sigma, self.p)  # M = V^T Q^T V

    def parameters(self):
        return [self.Q]

    def forward_backward(self):
        self.Q.grad = None
        loss, attn = self._loss(self.Q)
        loss.backward()
        return StepOutput(float(loss.detach()), attn.detach())

    def scores(self):
        return self.V.T @ self.Q.detach().T @ self.V

    def model_state(self):
        return {"Q": self.Q.detach().clone()}

    @torch.no_grad()
    def test_errors(self):
        return {"test_error": float(self._loss(self.Q)[0])}

    def objective_in_q(self):
        return lambda Q: self._loss(Q)[0]
