from __future__ import annotations

from core import repositories
from core.repositories import MetricPointIn
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def _job_with_points(api: ApiHarness, headers: dict[str, str]) -> str:
    job_id = str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])
    points = [
        MetricPointIn(step=step, epoch=step // 100, name=name, value=step / 1000)
        for step in (10, 20, 30, 40)
        for name in ("train_loss", "train_accuracy", "lr")
    ]
    with api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=points)
        session.commit()
    return job_id


def test_history_in_step_order(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = _job_with_points(api, headers)
    body = api.client.get(f"/v1/jobs/{job_id}/metrics", headers=headers).json()
    assert [p["step"] for p in body["points"]] == [10] * 3 + [20] * 3 + [30] * 3 + [40] * 3
    assert body["points"][0].keys() == {"step", "epoch", "name", "value", "time"}
    assert body["next_after_step"] is None


def test_after_step_and_names_filters(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = _job_with_points(api, headers)
    body = api.client.get(
        f"/v1/jobs/{job_id}/metrics",
        params={"after_step": 20, "names": "train_loss,lr"},
        headers=headers,
    ).json()
    assert [(p["step"], p["name"]) for p in body["points"]] == [
        (30, "lr"), (30, "train_loss"), (40, "lr"), (40, "train_loss")
    ]


def test_pages_never_split_a_step(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = _job_with_points(api, headers)
    url = f"/v1/jobs/{job_id}/metrics"
    first = api.client.get(url, params={"limit": 5}, headers=headers).json()
    assert {p["step"] for p in first["points"]} == {10}
    assert first["next_after_step"] == 10
    second = api.client.get(
        url, params={"limit": 5, "after_step": first["next_after_step"]}, headers=headers
    ).json()
    assert {p["step"] for p in second["points"]} == {20}


def test_resent_points_are_not_duplicated(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = _job_with_points(api, headers)
    with api.sessions() as session:  # a resumed worker re-sends step 40
        repositories.add_metric_points(
            session, job_id=job_id,
            points=[MetricPointIn(step=40, epoch=0, name="train_loss", value=9.0)],
        )
        session.commit()
    body = api.client.get(
        f"/v1/jobs/{job_id}/metrics", params={"names": "train_loss"}, headers=headers
    ).json()
    assert [p["step"] for p in body["points"]] == [10, 20, 30, 40]
