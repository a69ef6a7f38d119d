"""contract.einsum: torch.einsum with each path found once gives torch.einsum's numbers bit for bit."""

from __future__ import annotations

import pytest
import torch
import torch.backends.opt_einsum as torch_opt_einsum

from lipschitz_icl import contract

CASES = [  # (equation, shapes): the contractions the toolkit makes, and a 2-operand one
    ("sij,jk,slk,li->s", [(64, 4, 4), (4, 4), (64, 4, 4), (4, 4)]),
    ("sij,sjk,slk,li->s", [(32, 3, 3), (32, 3, 3), (32, 3, 3), (3, 3)]),
    ("bi,ij,bj->b", [(100, 5), (5, 5), (100, 5)]),
    ("kbn,nm,kbm->kb", [(4, 33, 4), (4, 4), (4, 33, 4)]),
    ("bn,bni,bj->bij", [(20, 16), (20, 16, 3), (20, 3)]),
    ("h,hri,hrj->ij", [(2,), (2, 3, 4), (2, 3, 4)]),
    ("bn,bnd->bd", [(10, 7), (10, 7, 3)]),
]


def _operands(shapes: list[tuple[int, ...]], seed: int, grad: bool) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=gen, dtype=torch.float64, requires_grad=grad) for s in shapes]


@pytest.mark.parametrize(("equation", "shapes"), CASES)
def test_values_and_gradients_equal_torch_einsum_bit_for_bit(equation: str, shapes: list) -> None:
    for seed in range(3):  # the second and third calls take the kept path
        mine, ref = _operands(shapes, seed, True), _operands(shapes, seed, True)
        out, expected = contract.einsum(equation, *mine), torch.einsum(equation, *ref)
        assert torch.equal(out, expected)
        (out.square().sum()).backward()
        (expected.square().sum()).backward()
        for a, b in zip(mine, ref, strict=True):
            assert torch.equal(a.grad, b.grad)


needs_opt_einsum = pytest.mark.skipif(not torch_opt_einsum.enabled, reason="opt_einsum is not installed: torch "
                                      "contracts left to right and there is no path to keep")


@needs_opt_einsum
def test_a_path_is_kept_per_equation_and_shapes_and_strategy() -> None:
    contract._PATHS.clear()
    ops = _operands([(8, 3), (3, 3), (8, 3)], 0, False)
    contract.einsum("bi,ij,bj->b", *ops)
    contract.einsum("bi,ij,bj->b", *ops)
    assert len(contract._PATHS) == 1
    contract.einsum("bi,ij,bj->b", *_operands([(9, 3), (3, 3), (9, 3)], 0, False))
    assert len(contract._PATHS) == 2


def test_without_opt_einsum_it_is_torch_einsum_left_to_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_opt_einsum, "enabled", False)
    ops = _operands([(64, 4, 4), (4, 4), (64, 4, 4), (4, 4)], 1, False)
    assert torch.equal(contract.einsum("sij,jk,slk,li->s", *ops), torch.einsum("sij,jk,slk,li->s", *ops))


@needs_opt_einsum
def test_the_kept_paths_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contract, "_MAX_PATHS", 3)
    contract._PATHS.clear()
    for b in range(1, 8):
        ops = _operands([(b, 2), (2, 2), (b, 2)], b, False)
        assert torch.equal(contract.einsum("bi,ij,bj->b", *ops), torch.einsum("bi,ij,bj->b", *ops))
        assert len(contract._PATHS) <= 3
