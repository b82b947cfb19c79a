"""Bad input of every kind is a 4xx naming the problem, and changes nothing stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import func, select

from core.models import Job, JobCommand
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def _count_jobs(api: ApiHarness) -> int:
    with api.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}
    return dict(body["error"])


class TestAuth:
    def test_missing_token_is_401(self, api: ApiHarness) -> None:
        before = _count_jobs(api)
        response = api.client.post("/v1/jobs", json=digits_spec())
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert "bearer token" in _error(response)["message"]
        assert _count_jobs(api) == before

    @pytest.mark.parametrize(
        "header", ["Bearer rdr_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer", "rdr_x"]
    )
    def test_invalid_token_is_401(self, api: ApiHarness, header: str) -> None:
        response = api.client.get("/v1/jobs", headers={"Authorization": header})
        assert response.status_code == 401
        assert _error(response)["code"] == "unauthorized"

    def test_revoked_token_stops_working(self, make_api: Any) -> None:
        from core.tokens import revoke_token

        api = make_api(auth_cache_seconds=0)
        _, headers = api.make_user()
        assert api.client.get("/v1/jobs", headers=headers).status_code == 200
        token = headers["Authorization"].split()[1]
        with api.sessions() as session:
            secret = api.settings.secret_key.get_secret_value()
            assert revoke_token(session, token=token, secret=secret)
            session.commit()
        assert api.client.get("/v1/jobs", headers=headers).status_code == 401


class TestSpecValidation:
    def test_malformed_json_is_400(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        before = _count_jobs(api)
        response = api.client.post(
            "/v1/jobs",
            content=b'{"name": "x", "model": [',
            headers=headers | {"Content-Type": "application/json"},
        )
        assert response.status_code == 400
        assert _error(response)["code"] == "malformed_json"
        assert _count_jobs(api) == before

    @pytest.mark.parametrize(
        ("change", "field", "words"),
        [
            ({"colour": "blue"}, "colour", "unknown field"),
            ({"model": [{"type": "Transformer", "units": 3}]}, "model.0", "Transformer"),
            ({"model": [{"type": "Dense", "units": 3, "unitz": 4}]}, "model.0.unitz",
             "unknown field; did you mean units?"),
            ({"optimizer": {"type": "adamz", "learning_rate": 0.1}}, "optimizer", "adamz"),
            ({"optimizer": {"type": "sgd", "learning_rate": -1}}, "optimizer", "> 0"),
            ({"optimizer": {"type": "sgd", "lr": 0.1}}, "optimizer", "lr"),
            ({"loss": {"type": "hinge"}}, "loss", "hinge"),
            ({"initializer": {"type": "he"}}, "initializer", "he"),
            ({"lr_scheduler": {"type": "exponential"}}, "lr_scheduler", "exponential"),
            ({"metrics": ["accuracy", "bleu"]}, "metrics", "bleu"),
            ({"epochs": 0}, "epochs", "greater than or equal to 1"),
            ({"device": "tpu"}, "device", "cpu"),
            ({"data": {"train": {"builtin": "imagenet"}}}, "data.train.builtin", "digits"),
            ({"model": []}, "model", "at least 1"),
            # issue 9: parameters per class, not per kind
            ({"optimizer": {"type": "adam", "momentum": 0.9}}, "optimizer", "momentum"),
            ({"loss": {"type": "l2", "sparse_label": True}}, "loss", "sparse_label"),
            # issue 14: types and ranges per parameter
            ({"optimizer": {"type": "sgd", "momentum": "abc"}}, "optimizer", "momentum"),
            ({"loss": {"type": "softmax_cross_entropy", "axis": "x"}}, "loss", "axis"),
            ({"lr_scheduler": {"type": "cosine", "max_update": "x"}}, "lr_scheduler",
             "max_update"),
            ({"optimizer": {"type": "adam", "epsilon": -1}}, "optimizer", "epsilon must be > 0"),
            ({"optimizer": {"type": "adam", "clip_gradient": True}}, "optimizer",
             "clip_gradient must be a number"),
            ({"model": [{"type": "Dense", "units": 10**6}, {"type": "Dense", "units": 10**6}]},
             "model", "limit per job"),
            ({"data": {"train": {"dataset": "../../../../etc/passwd"}}}, "data.train.dataset",
             "is not a dataset id"),
            # found by tests/api/test_schemathesis.py: a list as a data source was a 500
            ({"data": {"train": {"builtin": "digits"}, "val": [None, None], "batch_size": 8}},
             "data.val", "a data source"),
        ],
    )
    def test_invalid_spec_names_the_field(
        self, api: ApiHarness, change: dict[str, Any], field: str, words: str
    ) -> None:
        _, headers = api.make_user()
        before = _count_jobs(api)
        response = api.client.post("/v1/jobs", json=digits_spec(**change), headers=headers)
        assert response.status_code == 422, response.text
        error = _error(response)
        assert error["code"] == "validation_error"
        fields = [d["field"] for d in error["details"]]
        assert field in fields, fields
        assert error["message"].startswith(f"{error['details'][0]['field']}:")
        assert words in json.dumps(error["details"]), error
        assert _count_jobs(api) == before

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"model": [{"type": "Dense", "unit": 128, "activation": "relu"}]},
             "model.0.unit: unknown field; did you mean units?"),
            ({"data": {"train": {"builtin": "digits", "splt": "train"}}},
             "data.train.splt: unknown field; did you mean split?"),
            ({"checkpoint": {"every_step": 10}},
             "checkpoint.every_step: unknown field; did you mean every_steps?"),
            ({"epoch": 3}, "epoch: unknown field; did you mean epochs?"),
            ({"optimizer": {"type": "adam", "learning_rate": 0.01, "wdd": 0.1}},
             "optimizer: adam takes no parameter wdd; did you mean wd?"),
        ],
    )
    def test_a_misspelt_field_leads_with_the_field_meant(
        self, api: ApiHarness, change: dict[str, Any], message: str
    ) -> None:
        """Issue 26: a typo is reported as itself with the contract's nearest name, not
        as the required field it left out ("model.0.units: Field required")."""
        _, headers = api.make_user()
        response = api.client.post("/v1/jobs", json=digits_spec(**change), headers=headers)
        assert response.status_code == 422, response.text
        error = _error(response)
        assert error["message"].startswith(message), error
        assert "Field required" not in json.dumps(error), error

    def test_nan_learning_rate_in_spec_is_refused(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        body = json.dumps(digits_spec()).replace('"learning_rate": 0.001', '"learning_rate": NaN')
        response = api.client.post(
            "/v1/jobs", content=body, headers=headers | {"Content-Type": "application/json"}
        )
        assert response.status_code == 422
        assert "finite" in response.json()["error"]["message"]

    def test_spec_learning_rate_outside_bounds(self, make_api: Any) -> None:
        api = make_api(lr={"min": 1e-6, "max": 0.5})
        _, headers = api.make_user()
        spec = digits_spec(optimizer={"type": "sgd", "learning_rate": 0.9})
        response = api.client.post("/v1/jobs", json=spec, headers=headers)
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["field"] == "optimizer.learning_rate"

    def test_the_per_job_memory_limit_is_configurable(self, make_api: Any) -> None:
        api = make_api(limits={"max_job_memory_bytes": 100_000})
        _, headers = api.make_user()
        small = digits_spec(model=[{"type": "Dense", "units": 10}])
        assert api.client.post("/v1/jobs", json=small, headers=headers).status_code == 201
        wide = digits_spec(model=[{"type": "Dense", "units": 1000}, {"type": "Dense",
                                                                      "units": 10}])
        response = api.client.post("/v1/jobs", json=wide, headers=headers)
        assert response.status_code == 422
        error = _error(response)
        assert error["details"][0]["field"] == "model"
        assert "limit per job is 97.7 KiB" in error["message"]

    def test_more_workers_than_the_configured_maximum_is_refused(self, make_api: Any) -> None:
        api = make_api(limits={"max_job_workers": 2})
        _, headers = api.make_user()
        before = _count_jobs(api)
        spec = digits_spec(resources={"workers": 3})
        spec["data"]["batch_size"] = 48  # splits evenly: the count is what is refused
        response = api.client.post("/v1/jobs", json=spec, headers=headers)
        assert response.status_code == 422
        error = _error(response)
        assert error["details"][0]["field"] == "resources.workers"
        assert "at most 2 per job" in error["message"]
        assert _count_jobs(api) == before
        accepted = api.client.post("/v1/jobs", json=digits_spec(resources={"workers": 2}),
                                   headers=headers)
        assert accepted.status_code == 201
        assert accepted.json()["spec"]["resources"] == {"workers": 2}

    def test_a_batch_that_does_not_split_among_the_workers_is_refused(
            self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        spec = digits_spec(resources={"workers": 2})
        spec["data"]["batch_size"] = 33
        response = api.client.post("/v1/jobs", json=spec, headers=headers)
        assert response.status_code == 422
        assert "data.batch_size" in _error(response)["message"]

    def test_unknown_dataset_is_refused(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        missing = "00000000-0000-0000-0000-000000000000"
        spec = digits_spec(data={"train": {"dataset": missing}, "batch_size": 8})
        response = api.client.post("/v1/jobs", json=spec, headers=headers)
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["field"] == "data.train.dataset"

    def test_oversized_spec_is_413(self, make_api: Any) -> None:
        api = make_api(limits={"max_spec_bytes": 2048})
        _, headers = api.make_user()
        before = _count_jobs(api)
        response = api.client.post(
            "/v1/jobs", json=digits_spec(name="x" * 100, padding="y" * 5000), headers=headers
        )
        assert response.status_code == 413
        assert _error(response)["code"] == "payload_too_large"
        assert _count_jobs(api) == before


class TestLearningRateValidation:
    @pytest.mark.parametrize(
        ("raw", "status", "field"),
        [
            ('{"learning_rate": NaN}', 422, "learning_rate"),
            ('{"learning_rate": Infinity}', 422, "learning_rate"),
            ('{"learning_rate": -0.1}', 422, "learning_rate"),
            ('{"learning_rate": 0}', 422, "learning_rate"),
            ('{"learning_rate": 50}', 422, "learning_rate"),
            ('{"learning_rate": "fast"}', 422, "learning_rate"),
            ('{"learning_rate": true}', 422, "learning_rate"),  # not applied as 1.0
            ('{"learning_rate": "0.1"}', 422, "learning_rate"),
            ('{"learning_rate": 0.1, "mode": "double"}', 422, "mode"),
            ('{"learning_rate": 0.1, "extra": 1}', 422, "extra"),
            ('{"learning_rate": ', 400, None),
        ],
    )
    def test_bad_learning_rate_is_refused_and_not_stored(
        self, api: ApiHarness, raw: str, status: int, field: str | None
    ) -> None:
        _, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        response = api.client.put(
            f"/v1/jobs/{job_id}/learning-rate",
            content=raw,
            headers=headers | {"Content-Type": "application/json"},
        )
        assert response.status_code == status, response.text
        if field is not None:
            assert response.json()["error"]["details"][0]["field"] == field
        with api.sessions() as session:
            stored = select(JobCommand).where(JobCommand.job_id == job_id)
            assert session.scalars(stored).all() == []


def test_unknown_route_is_a_json_404(api: ApiHarness) -> None:
    response = api.client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert _error(response)["code"] == "not_found"


def test_openapi_documents_every_endpoint(api: ApiHarness) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    for path in [
        "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/pause", "/v1/jobs/{job_id}/resume",
        "/v1/jobs/{job_id}/cancel", "/v1/jobs/{job_id}/learning-rate",
        "/v1/jobs/{job_id}/metrics", "/v1/jobs/{job_id}/events",
        "/v1/jobs/{job_id}/checkpoints", "/v1/datasets", "/healthz", "/readyz", "/metrics",
    ]:
        assert path in paths, path


def test_openapi_declares_bearer_auth_and_the_real_error_body(api: ApiHarness) -> None:
    """Issue 15: Swagger's Authorize button sends the token, and every documented error
    is {"error": {code, message, details}}, not FastAPI's HTTPValidationError."""
    document = api.client.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    assert schemes == {"BearerAuth": {"type": "http", "scheme": "bearer",
                                      "description": schemes["BearerAuth"]["description"]}}
    assert "HTTPValidationError" not in json.dumps(document)
    error_body = document["components"]["schemas"]["ErrorBody"]
    assert error_body["required"] == ["error"]
    for path, operations in document["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, operation in operations.items():
            assert operation["security"] == [{"BearerAuth": []}], (method, path)
            responses = operation["responses"]
            assert {"401", "503"} <= set(responses), (method, path)
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref == "#/components/schemas/ErrorBody", (method, path, status)
    lr = document["paths"]["/v1/jobs/{job_id}/learning-rate"]["put"]["responses"]
    assert {"404", "409", "413", "422", "429"} <= set(lr)
    delete = document["paths"]["/v1/jobs/{job_id}"]["delete"]["responses"]
    assert {"204", "404", "409"} <= set(delete)


def test_every_documented_error_status_matches_a_real_answer(api: ApiHarness) -> None:
    """The documented statuses are the ones the API gives (one live check per kind)."""
    _, headers = api.make_user()
    missing = "00000000-0000-0000-0000-000000000000"
    assert api.client.get(f"/v1/jobs/{missing}").status_code == 401
    assert api.client.get(f"/v1/jobs/{missing}", headers=headers).status_code == 404
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    assert api.client.delete(f"/v1/jobs/{job_id}", headers=headers).status_code == 409
    body = api.client.put(f"/v1/jobs/{job_id}/learning-rate", json={"learning_rate": "x"},
                          headers=headers)
    assert body.status_code == 422 and set(body.json()) == {"error"}


class TestControlCharacters:
    """Issue 14 item 4: NUL bytes reached PostgreSQL and came back as 500s."""

    def test_a_job_name_with_a_nul_byte_is_a_422(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        before = _count_jobs(api)
        response = api.client.post("/v1/jobs", json=digits_spec(name="abc\x00def"),
                                   headers=headers)
        assert response.status_code == 422
        assert _error(response)["details"][0]["field"] == "name"
        assert _count_jobs(api) == before

    @pytest.mark.parametrize(
        "path", ["/v1/jobs/abc%00def", "/v1/jobs/abc%00def/metrics",
                 "/v1/jobs/abc%00def/events", "/v1/jobs/abc%00def/learning-rate"],
    )
    def test_an_id_with_a_nul_byte_is_a_404(self, api: ApiHarness, path: str) -> None:
        _, headers = api.make_user()
        response = api.client.get(path, headers=headers)
        assert response.status_code == 404, response.text
        assert _error(response)["code"] == "not_found"

    def test_deleting_a_dataset_id_with_a_nul_byte_is_a_404(self, api: ApiHarness) -> None:
        _, headers = api.make_user()
        response = api.client.delete("/v1/datasets/abc%00def", headers=headers)
        assert response.status_code == 404

    @pytest.mark.parametrize("path", ["/metrics", "/metrics/series"])
    def test_a_metric_name_with_a_nul_byte_is_a_422(self, api: ApiHarness, path: str) -> None:
        """Found by tests/api/test_schemathesis.py: a 500 on PostgreSQL."""
        _, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        response = api.client.get(f"/v1/jobs/{job_id}{path}",
                                  params={"names": "train_loss,a\x00b"}, headers=headers)
        assert response.status_code == 422, response.text
        assert _error(response)["details"][0]["field"] == "names"

    def test_a_cursor_hiding_a_nul_byte_is_a_400(self, api: ApiHarness) -> None:
        from api.cursors import encode_cursor

        _, headers = api.make_user()
        job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
        for path, cursor in [
            ("/v1/jobs", encode_cursor("2026-11-23T05:00:00+00:00", "a\x00b")),
            (f"/v1/jobs/{job_id}/metrics", encode_cursor(3, "train\x00loss")),
        ]:
            response = api.client.get(path, params={"cursor": cursor}, headers=headers)
            assert response.status_code == 400, (path, response.text)
            assert _error(response)["details"][0]["field"] == "cursor"


def test_a_wrong_method_is_a_405_that_names_every_method_of_the_path(api: ApiHarness) -> None:
    """FastAPI's 405 named only the first route's methods (GET /v1/jobs/{id} said
    ``Allow: GET`` although DELETE works too); found by schemathesis."""
    _, headers = api.make_user()
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"]
    for path, allowed in [(f"/v1/jobs/{job_id}", "DELETE, GET"),
                          (f"/v1/jobs/{job_id}/learning-rate", "GET, PUT"),
                          ("/v1/jobs", "GET, POST")]:
        response = api.client.request("PATCH", path, headers=headers)
        assert response.status_code == 405
        assert response.headers["Allow"] == allowed
        assert _error(response)["code"] == "method_not_allowed"
