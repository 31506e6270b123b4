"""HTML pages (owned by the explorer work; placeholder until it lands)."""

from fastapi import APIRouter

router = APIRouter(include_in_schema=False)
