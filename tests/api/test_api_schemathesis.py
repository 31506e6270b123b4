"""Property-based fuzzing of every operation in the OpenAPI spec (schemathesis 4).

Each generated request must get a response that is not a 5xx and that matches
what the spec declares: a documented status code, content type, headers and a
body valid against its schema.  Operations added later (``/api/model/...``) are
picked up from the spec automatically.

``positive_data_acceptance`` is left out on purpose: the size limits are
settings (``ATTENTION_VIZ_MAX_*``), not schema constraints, so a schema-valid
body with 65 tokens is rightly answered 422.
"""

from __future__ import annotations

import tempfile
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from app.settings import Settings

MIN_REQUESTS = 1_000
EXAMPLES_PER_OPERATION = 130
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

# Its own runs directory: DELETE /api/runs/{name} is called with generated names.
app = create_app(Settings(runs_dir=tempfile.mkdtemp(prefix="schemathesis-runs-")))
# POST /api/train is left out: a valid body starts a training process that streams for a
# minute (tests/api/test_train_api.py and test_train_live.py cover its inputs and limits).
schema = schemathesis.openapi.from_asgi("/openapi.json", app).exclude(
    path="/api/train", method="POST"
)
OPERATIONS = [result.ok() for result in schema.get_all_operations()]
REQUESTS: Counter[str] = Counter()
STATUSES: Counter[int] = Counter()


@pytest.fixture(scope="module", autouse=True)
def enough_requests(request):
    """After the module: ≥ MIN_REQUESTS requests were sent when every operation ran."""
    yield
    documented = {f"{op.method.upper()} {op.path}" for op in OPERATIONS}
    if documented <= set(REQUESTS):  # not when a -k selection ran only some operations
        total = sum(REQUESTS.values())
        per_operation = {name: REQUESTS[name] for name in sorted(documented)}
        print(f"\nschemathesis: {total} requests; {per_operation}; statuses {dict(STATUSES)}")
        assert total >= MIN_REQUESTS, f"only {total} generated requests: {dict(REQUESTS)}"


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_api_conforms_to_its_openapi_spec(case):
    response = case.call_and_validate(checks=CHECKS)
    REQUESTS[f"{case.method.upper()} {case.path}"] += 1
    STATUSES[response.status_code] += 1
    assert response.status_code < 500


def test_spec_lists_the_api():
    paths = {op.path for op in OPERATIONS}
    assert {"/api/attention", "/api/compare", "/api/presets/{name}"} <= paths
    assert len(OPERATIONS) >= 8
