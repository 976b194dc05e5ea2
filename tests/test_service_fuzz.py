"""Property-based API fuzzing of ``rlsched serve`` from its own OpenAPI schema (schemathesis),
against a real uvicorn on 127.0.0.1: no request may get a 5xx, and every response must match the
schema the service publishes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from tests.service_helpers import TOKENS, Server, free_port, service_config


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    s = Server(service_config(folder, port, {"video": "admin = true\n"}), port)
    s.start()
    yield s
    s.stop()


def test_no_5xx_and_every_response_matches_the_schema(live_server: Server) -> None:
    """Every operation of the published schema, 25 generated requests each (authenticated as an
    admin tenant, so the handlers, not only the auth and role checks, are exercised)."""
    schema = schemathesis.openapi.from_url(f"{live_server.url}/openapi.json")
    headers = {"Authorization": f"Bearer {TOKENS['video']}"}
    ran = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(
                base_url=live_server.url,
                headers=headers,
                checks=[not_a_server_error, response_schema_conformance],
                timeout=30,
            )

        run()
        ran.append(operation.label)
    assert len(ran) >= 7, ran


def test_schema_is_published(live_server: Server) -> None:
    import httpx

    doc = httpx.get(f"{live_server.url}/openapi.json").json()
    assert {"/v1/tasks", "/v1/tasks/{task_id}", "/healthz", "/readyz", "/metrics"} <= set(doc["paths"])
    # The bearer scheme and the error answers (FastAPI lists only 2xx and 422; the token was an
    # optional "authorization" header parameter).
    bearer = doc["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    submit = doc["paths"]["/v1/tasks"]["post"]
    assert submit["security"] == [{"bearer": []}]
    assert {"200", "201", "401", "408", "413", "415", "422", "429", "503", "507"} <= set(submit["responses"])
    assert all(p["name"].lower() != "authorization" for p in submit.get("parameters", []))
    assert "403" in doc["paths"]["/v1/admin/scheduler"]["put"]["responses"]
    assert "404" in doc["paths"]["/v1/tasks/{task_id}"]["get"]["responses"]
    assert "security" not in doc["paths"]["/healthz"]["get"]
    refused = httpx.get(f"{live_server.url}/v1/tasks")
    assert refused.status_code == 401 and set(refused.json()) == {"detail"}  # the Error schema
