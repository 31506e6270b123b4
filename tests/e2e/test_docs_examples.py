"""/docs: every POST operation's pre-filled body (what Swagger UI puts in "Try it out")
is a request that succeeds against the default server, sent as written."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e

# Streams and uploads answer in their own way; every other POST answers JSON.
SLOW = 120


def prefilled_bodies(page: Page) -> dict[str, str]:
    """Path -> the JSON body Swagger UI pre-fills for each POST operation with a JSON body."""
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_be_visible(timeout=60_000)
    bodies: dict[str, str] = {}
    operations = page.locator(".opblock-post")
    for index in range(operations.count()):
        operation = operations.nth(index)
        path = operation.locator(".opblock-summary-path").first.get_attribute("data-path") or ""
        operation.locator(".opblock-summary").first.click()
        try_it = operation.get_by_role("button", name="Try it out")
        if try_it.count() == 0:
            operation.locator(".opblock-summary").first.click()
            continue
        try_it.click()
        body = operation.locator("textarea.body-param__text")
        if body.count():
            bodies[path] = body.input_value()
        operation.locator(".opblock-summary").first.click()
    return bodies


def post(url: str, body: str) -> tuple[int, str]:
    """The status and the whole answer; a stream that ends in an error event counts as
    that event's status (NDJSON ``{"event": "error", "status": ...}``, SSE ``event: error``)."""
    request = urllib.request.Request(
        url, data=body.encode(), headers={"content-type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=SLOW) as response:
            answer = response.read().decode(errors="replace")
            status = response.status
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    if "event: error" in answer:
        return 500, answer
    for line in answer.splitlines():
        if line.startswith('{"event":"error"') or line.startswith('{"event": "error"'):
            return int(json.loads(line).get("status", 500)), line
    return status, answer


def test_every_prefilled_example_succeeds(page: Page, server_url: str) -> None:
    bodies = prefilled_bodies(page)
    assert len(bodies) >= 10, sorted(bodies)
    failures = {}
    for path, body in sorted(bodies.items()):
        json.loads(body)  # a JSON body, as Swagger UI sends it
        status, answer = post(f"{server_url}{path}", body)
        if status != 200:
            failures[path] = f"{status}: {body} -> {answer[-400:]}"
    assert not failures, "\n".join(f"{p}: {f}" for p, f in failures.items())
