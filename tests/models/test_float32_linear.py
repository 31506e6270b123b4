"""A 16-bit linear layer computed in float32 through a reused buffer (in blocks of rows
when the weight is larger than the buffer).

Oracle: ``F.linear`` with the weight upcast whole (what the parametrization did
for every call before), to float32 rounding.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention_core.models.checkpoints import float32_linear as module
from attention_core.models.checkpoints.float32_linear import block_rows, float32_linear
from attention_core.models.checkpoints.weight_dtype import compute_in_float32, run_on


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("buffer_rows", [512, 4096])
@pytest.mark.parametrize("tokens", [5, 100])
def test_the_buffer_gives_the_whole_upcast_weight(
    dtype: torch.dtype, buffer_rows: int, tokens: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2 x 5 rows of x: the few-rows way (blocks of ``CACHED_ELEMENTS``: 512, 512 and
    276 rows of 2048); 2 x 100: the whole buffer's, 512 rows: three blocks; 4096: the
    whole weight at once."""
    monkeypatch.setattr(module, "BUFFER_ELEMENTS", buffer_rows * 2048)
    assert module.CACHED_ELEMENTS // 2048 == 512 and 10 <= module.FEW_ROWS < 200
    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn(1300, 2048, generator=generator) * 0.02).to(dtype)
    bias = torch.randn(1300, generator=generator).to(dtype)
    x = torch.randn(2, tokens, 2048, generator=generator)
    assert block_rows(2048) == buffer_rows
    expected = F.linear(x, weight.float(), bias.float())
    for _ in range(2):  # the second call reuses the buffer
        out = float32_linear(x, weight, bias)
        assert out.dtype == torch.float32 and out.shape == (2, tokens, 1300)
        assert out.is_contiguous()
        # Float32 rounding: the few-rows way sums each row in another order.
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_a_held_linear_runs_block_by_block_and_its_weight_still_reads_float32() -> None:
    layer = nn.Linear(2048, 1300, bias=False).to(torch.bfloat16).requires_grad_(False)
    x = torch.randn(7, 2048)
    expected = F.linear(x, layer.weight.float())
    compute_in_float32(layer)
    compute_in_float32(layer)  # again (a load, then placing on the CPU): nothing nested
    assert "forward" in layer.__dict__  # the buffered forward
    assert layer.weight.dtype == torch.float32  # other readers: the parametrization
    assert layer.parametrizations["weight"].original.dtype == torch.bfloat16
    reads: list[torch.Tensor] = []
    layer.parametrizations["weight"].register_forward_hook(lambda *a: reads.append(a[2]))
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), expected, atol=1e-6, rtol=1e-6)
    assert reads == []  # the forward never made the whole float32 copy
    # A GPU runs 16-bit weights in their own dtype: both undone.
    run_on(layer, torch.device("meta"))
    assert "forward" not in layer.__dict__ and layer.weight.dtype == torch.bfloat16


def test_a_gradient_through_a_held_linear_is_the_upcast_weight_s() -> None:
    """Recording a gradient (attribution) takes the whole-weight path: autograd follows it."""
    layer = nn.Linear(2048, 1300, bias=False).to(torch.bfloat16).requires_grad_(False)
    compute_in_float32(layer)
    x = torch.randn(3, 2048, requires_grad=True)
    layer(x).sum().backward()
    assert x.grad is not None
    expected = layer.weight.float().sum(0).expand(3, -1)
    torch.testing.assert_close(x.grad, expected, atol=1e-5, rtol=1e-5)
