"""Bad input end to end: always a 4xx with a clear message, never a 500, nothing stored."""

from __future__ import annotations

import io

import httpx
import numpy as np
import pytest

from rudder.client import Client
from tests.e2e.conftest import example_spec
from tests.e2e.harness import Stack

pytestmark = pytest.mark.slow


def _error(response: httpx.Response) -> dict:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    assert body["error"]["message"]
    return dict(body["error"])


def test_bad_requests_are_clear_4xx_and_store_nothing(stack: Stack, client: Client) -> None:
    auth = {"Authorization": f"Bearer {stack.token}"}
    http = httpx.Client(base_url=stack.api_url, headers=auth, timeout=30)
    before = len(client.list_jobs()["data"])

    _error(http.post("/v1/jobs", content=b'{"name": "x", "model": [',
                     headers={"Content-Type": "application/json"}))
    unknown_layer = example_spec(model=[{"type": "Teleporter", "units": 3}])
    error = _error(http.post("/v1/jobs", json=unknown_layer))
    assert "model" in str(error)
    unknown_optimizer = example_spec(optimizer={"type": "warp-drive", "learning_rate": 0.1})
    assert "warp-drive" in str(_error(http.post("/v1/jobs", json=unknown_optimizer)))
    assert _error(http.post("/v1/jobs", json=example_spec(epochs=-1)))
    assert len(client.list_jobs()["data"]) == before

    job = client.submit(example_spec(name="target", epochs=1))
    for bad in (b'{"learning_rate": NaN}', b'{"learning_rate": -0.1}',
                b'{"learning_rate": "fast"}', b'{"learning_rate": 1e9}'):
        _error(http.put(f"/v1/jobs/{job['id']}/learning-rate", content=bad,
                        headers={"Content-Type": "application/json"}))
    assert client.learning_rate(job["id"])["changes"] == []

    buffer = io.BytesIO()
    np.savez(buffer, data=np.array([object()], dtype=object), label=np.zeros(1))
    pickled = http.post("/v1/datasets", files={"file": ("evil.npz", buffer.getvalue())})
    assert "pickle" in _error(pickled)["message"].lower()

    stranger = stack.issue_token("e2e-stranger")
    other = httpx.get(f"{stack.api_url}/v1/jobs/{job['id']}",
                      headers={"Authorization": f"Bearer {stranger}"})
    assert other.status_code == 404
    assert httpx.get(f"{stack.api_url}/v1/jobs/{job['id']}").status_code == 401
    http.close()
