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
    assert body["next_cursor"] is None


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


def _job_with_many_names(
    api: ApiHarness, headers: dict[str, str]
) -> tuple[str, list[tuple[int, str]]]:
    """7 metric names per step over 20 steps: each step has more points than a page."""
    job_id = str(api.client.post("/v1/jobs", json=digits_spec(), headers=headers).json()["id"])
    names = ["lr", "train_accuracy", "train_loss", "train_top_k", "val_accuracy",
             "val_cross-entropy", "val_loss"]
    points = [
        MetricPointIn(step=step, epoch=0, name=name, value=step + index / 10)
        for step in range(1, 21)
        for index, name in enumerate(names)
    ]
    with api.sessions() as session:
        repositories.add_metric_points(session, job_id=job_id, points=points)
        session.commit()
    return job_id, [(p.step, p.name) for p in points]


def test_cursor_pages_return_every_point_once_in_order(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id, expected = _job_with_many_names(api, headers)
    url = f"/v1/jobs/{job_id}/metrics"
    seen: list[tuple[int, str]] = []
    params: dict[str, str | int] = {"limit": 3}
    for _ in range(len(expected)):  # more pages than that would be a loop
        body = api.client.get(url, params=params, headers=headers).json()
        assert 1 <= len(body["points"]) <= 3
        seen += [(p["step"], p["name"]) for p in body["points"]]
        if body["next_cursor"] is None:
            break
        params = {"limit": 3, "cursor": body["next_cursor"]}
    assert seen == expected


def test_cursor_combines_with_filters(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id, expected = _job_with_many_names(api, headers)
    url = f"/v1/jobs/{job_id}/metrics"
    wanted = [(s, n) for s, n in expected if s > 15 and n in ("lr", "val_loss")]
    seen: list[tuple[int, str]] = []
    params: dict[str, str | int] = {"limit": 1, "after_step": 15, "names": "lr,val_loss"}
    while True:
        body = api.client.get(url, params=params, headers=headers).json()
        seen += [(p["step"], p["name"]) for p in body["points"]]
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert seen == wanted


def test_after_step_paging_keeps_working_where_steps_fit_a_page(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id, expected = _job_with_many_names(api, headers)
    url = f"/v1/jobs/{job_id}/metrics"
    seen: list[tuple[int, str]] = []
    params: dict[str, int] = {"limit": 10}
    while True:  # how clients from before the cursor page
        body = api.client.get(url, params=params, headers=headers).json()
        seen += [(p["step"], p["name"]) for p in body["points"]]
        if body["next_after_step"] is None:
            break
        params = {"limit": 10, "after_step": body["next_after_step"]}
    assert seen == expected


def test_a_cursor_not_from_the_api_is_a_400(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id, _ = _job_with_many_names(api, headers)
    from api.cursors import encode_cursor

    # ["x", 1] has its fields swapped; a step of 2**70 no database column can hold
    for cursor in ("not-a-cursor", "WyJ4IiwgMV0", encode_cursor(2**70, "x")):
        response = api.client.get(
            f"/v1/jobs/{job_id}/metrics", params={"cursor": cursor}, headers=headers
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "validation_error"
