"""Liveness and readiness probes."""

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from attention_core import get_preset, run

router = APIRouter(tags=["health"])


@router.get("/healthz", response_class=PlainTextResponse)
async def healthz() -> str:
    """Liveness: the process answers. Does no work."""
    return "ok"


@router.get("/readyz", response_class=PlainTextResponse)
async def readyz() -> str:
    """Readiness: the attention core computes the flagship example correctly."""
    trace = run(get_preset("bank-raw").spec)
    row_sums = trace.attn_weights.sum(dim=-1)
    if not bool((row_sums - 1).abs().max() < 1e-5):
        raise RuntimeError("attention core self-check failed")
    return "ready"
