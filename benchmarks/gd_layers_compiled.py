"""gd_layers (Ahn et al.'s exact multi-layer loss): the compiled loss and gradient (``linattn.gd_compiled``, numba:
the closed-form backward of the layer recursion in one loop over the draws) against the torch path
(``engines.gd_layers_loss`` and autograd: batched products of D x D matrices, D = 4, about 150 ns each).

Prints, for L = 2, 3, 4 at the Ahn et al. suite's full size (1,024 draws), the relative differences of loss and
gradient and the CPU milliseconds of one loss + gradient each way (the least of 5 rounds of 40).

    PYTHONPATH=src python benchmarks/gd_layers_compiled.py
"""

import time

import torch

from lipschitz_icl.linattn.engines import ExactEngine, gd_layers_loss
from lipschitz_icl.linattn.gd_compiled import CompiledGdLayers
from lipschitz_icl.papers.ahn2023.setting import AHN_SIZES, ahn_task


def main() -> None:
    torch.set_num_threads(1)
    task = ahn_task(AHN_SIZES["full"])
    covs = ExactEngine(task, 0, AHN_SIZES["full"].draws).covs()
    compiled = CompiledGdLayers(task, covs)
    gen = torch.Generator().manual_seed(0)
    for L in (2, 3, 4):
        A = (0.3 * torch.randn(L, task.dim, task.dim, generator=gen, dtype=torch.float64)).requires_grad_()
        loss = gd_layers_loss(A, task, covs)
        (grad,) = torch.autograd.grad(loss, A)
        loss_n = compiled(A)
        (grad_n,) = torch.autograd.grad(loss_n, A)
        rel_loss = abs(loss_n.item() - loss.item()) / abs(loss.item())
        rel_grad = float((grad_n - grad).abs().max() / grad.abs().max())
        torch_ms, numba_ms = [], []
        for _ in range(5):
            for way, times in ((lambda a: gd_layers_loss(a, task, covs), torch_ms), (compiled, numba_ms)):
                t = time.process_time()
                for _ in range(40):
                    torch.autograd.grad(way(A), A)
                times.append((time.process_time() - t) / 40 * 1e3)
        print(f"L={L}: loss rel diff {rel_loss:.1e}, grad rel diff {rel_grad:.1e}; CPU ms per loss + gradient: "
              f"torch {min(torch_ms):.3f}, numba {min(numba_ms):.3f} ({min(torch_ms) / min(numba_ms):.1f}x)")


if __name__ == "__main__":
    main()
