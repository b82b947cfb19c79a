"""issue 15.3: the PUT learning-rate answer previews what `scale` does, before it applies."""

from __future__ import annotations

import pytest

from core import repositories
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def _job_at_step(api: ApiHarness, headers: dict[str, str], step: int) -> str:
    spec = digits_spec(optimizer={"type": "adam", "learning_rate": 0.001},
                       lr_scheduler={"type": "cosine", "max_update": 1000,
                                     "warmup_steps": 50, "final_lr": 0.00001})
    job_id = str(api.client.post("/v1/jobs", json=spec, headers=headers).json()["id"])
    with api.sessions() as session:
        assert repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        repositories.update_job_progress(session, job_id=job_id, step=step, epoch=0)
        session.commit()
    return job_id


def test_scale_in_warmup_previews_the_multiplied_peak_and_final(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = _job_at_step(api, headers, 25)  # the ramp is at 0.0005 of its 0.001 peak
    answer = api.client.put(f"/v1/jobs/{job_id}/learning-rate",
                            json={"learning_rate": 0.002}, headers=headers)
    assert answer.status_code == 202, answer.text
    preview = answer.json()["preview"]
    assert preview["at_step"] == 25 and preview["in_warmup"] is True
    assert preview["current_lr"] == pytest.approx(0.0005)
    assert preview["factor"] == pytest.approx(4.0)
    assert (preview["peak_step"], preview["final_step"]) == (50, 1000)
    assert preview["peak_lr"] == pytest.approx(0.004)
    assert preview["final_lr"] == pytest.approx(0.00004)
    assert answer.json()["warning"] is None


def test_override_previews_a_constant_and_scale_at_zero_warns(api: ApiHarness) -> None:
    _, headers = api.make_user()
    job_id = _job_at_step(api, headers, 0)  # warmup from 0: nothing to scale yet
    scaled = api.client.put(f"/v1/jobs/{job_id}/learning-rate",
                            json={"learning_rate": 0.002}, headers=headers).json()
    assert scaled["preview"] is None
    assert "current learning rate is 0.0" in scaled["warning"]
    constant = api.client.put(f"/v1/jobs/{job_id}/learning-rate",
                              json={"learning_rate": 0.003, "mode": "override"},
                              headers=headers).json()["preview"]
    assert constant["factor"] is None
    assert constant["peak_lr"] == constant["final_lr"] == 0.003
