"""The GPU overview's kernel compiles for CUDA without a GPU: Triton lowers it to PTX and
its bundled ptxas to a Hopper (sm_90) and an Ampere (sm_80) binary, for float16 and
bfloat16 inputs, tiles spanning two cells and one atomic an entry, an 8B model's head
dim.  The interpreter tests (test_gpu_pooled.py) check what it computes; this checks
that the same source builds for the device (no interpreter-only construct)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.requires import require

require("triton")

SCRIPT = """
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile

from attention_core.models.maps.pooled_kernel import pooled_maps_kernel as kernel

names = kernel.arg_names
types = {n: "i32" for n in names} | {"lse_ptr": "*fp32", "heads_ptr": "*fp32"}
types |= {"average_ptr": "*fp32", "qk_scale": "fp32", "inv_heads": "fp32"}
for arch in (90, 80):
    for dtype, two, rows, cols in (("fp16", True, 128, 64), ("bf16", False, 16, 16)):
        constants = {"H": 32, "GROUP": 4, "CAUSAL": True, "AVERAGE": True}
        constants |= {"TWO_CELLS": two, "EXACT_FP32": False, "BM": rows, "BN": cols}
        constants |= {"BD": 128, "BK": 32}
        signature = types | {"q_ptr": f"*{dtype}", "k_ptr": f"*{dtype}"}
        signature |= {c: "constexpr" for c in constants}
        source = ASTSource(
            fn=kernel,
            signature=signature,
            constexprs={(names.index(k),): v for k, v in constants.items()},
        )
        warps = 8 if rows * cols >= 128 * 64 else 4
        built = compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
        assert built.asm["cubin"], (arch, dtype)
        print("built", arch, dtype, rows, cols)
"""


def test_the_kernel_builds_for_hopper_and_ampere() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # a real build
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n").count("built 90 fp16 128 64") == 1
    assert len([line for line in done.stdout.splitlines() if line.startswith("built")]) == 4
