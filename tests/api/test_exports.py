"""GET /v1/jobs/{id}/export: a job's network as MXNet files (issues 12, 26)."""

from __future__ import annotations

from core.storage import MODEL_PARAMS_FILE, MODEL_SYMBOL_FILE, job_export_prefix, open_store
from tests.api.checkpoint_files import mxnet_files, trained_network, write_checkpoint
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def test_the_export_lists_and_streams_both_files_only_to_the_owner(api: ApiHarness) -> None:
    _, alice = api.make_user()
    _, bob = api.make_user()
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=alice).json()["id"]
    response = api.client.get(f"/v1/jobs/{job_id}/export", headers=alice)
    assert response.status_code == 404 and "no checkpoint to export yet" in response.text

    # what the worker writes when the job succeeds (workers.networks.export_network)
    store = open_store(api.settings.storage_url)
    files = {MODEL_SYMBOL_FILE: b'{"nodes": [], "arg_nodes": [], "heads": []}',
             MODEL_PARAMS_FILE: bytes(range(256)) * 3}
    for name, data in files.items():
        store.put(job_export_prefix(job_id) + name, data)

    listed = api.client.get(f"/v1/jobs/{job_id}/export", headers=alice).json()
    assert listed["format"] == "mxnet"
    assert {(f["name"], f["size"]) for f in listed["files"]} == {
        (name, len(data)) for name, data in files.items()}
    for item in listed["files"]:
        download = api.client.get(item["url"], headers=alice)
        assert download.status_code == 200 and download.content == files[item["name"]]
        assert f'filename="{job_id}-' in download.headers["content-disposition"]
    assert api.client.get(f"/v1/jobs/{job_id}/export", headers=bob).status_code == 404
    assert api.client.get(listed["files"][0]["url"], headers=bob).status_code == 404
    bad_name = api.client.get(f"/v1/jobs/{job_id}/export/../meta.json", headers=alice)
    assert bad_name.status_code in (404, 422)


def test_a_cancelled_jobs_kept_checkpoints_export_by_step(api: ApiHarness) -> None:
    """Issue 26: any kept checkpoint of a job in any state, the latest by default, as the
    files the worker's export would write; a step with no kept checkpoint is a 404 that
    names ``step`` and lists the kept ones."""
    _, alice = api.make_user()
    _, bob = api.make_user()
    spec = digits_spec()
    job_id = api.client.post("/v1/jobs", json=spec, headers=alice).json()["id"]
    nothing = api.client.get(f"/v1/jobs/{job_id}/export", headers=alice)
    assert nothing.status_code == 404 and "no checkpoint to export yet" in nothing.text
    nets = {200: trained_network(spec, seed=1), 400: trained_network(spec, seed=2)}
    for step, net in nets.items():
        write_checkpoint(api, job_id, step, net)
    cancelled = api.client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
    assert cancelled.json()["status"] == "cancelled", cancelled.text

    for step, query in ((400, ""), (200, "?step=200"), (200, "?step=200")):
        listed = api.client.get(f"/v1/jobs/{job_id}/export{query}", headers=alice)
        assert listed.status_code == 200, listed.text
        assert listed.json()["step"] == step and listed.json()["format"] == "mxnet"
        expected = mxnet_files(nets[step])
        for item in listed.json()["files"]:
            download = api.client.get(item["url"], headers=alice)
            assert download.status_code == 200, download.text
            assert download.content == expected[item["name"]], (step, item["name"])
            assert f'filename="{job_id}-{step:010d}-' in download.headers["content-disposition"]
        assert api.client.get(listed.json()["files"][1]["url"], headers=bob).status_code == 404

    # a rollback and a new run can checkpoint the same step again, with other weights
    nets[400] = trained_network(spec, seed=5)
    write_checkpoint(api, job_id, 400, nets[400])
    again = api.client.get(f"/v1/jobs/{job_id}/export?step=400", headers=alice).json()
    params = api.client.get(again["files"][1]["url"], headers=alice).content
    assert params == mxnet_files(nets[400])["model-0000.params"]

    missing = api.client.get(f"/v1/jobs/{job_id}/export?step=300", headers=alice)
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert error["message"].startswith("step: ") and "kept steps: 200, 400" in error["message"]
    assert error["details"][0]["field"] == "step"
    assert error["details"][0]["kept_steps"] == [200, 400]
    write_checkpoint(api, job_id, 600, b"not an npz file")
    broken = api.client.get(f"/v1/jobs/{job_id}/export?step=600", headers=alice)
    assert broken.status_code == 409, broken.text
    assert "checkpoint at step 600 cannot be exported" in broken.json()["error"]["message"]
    negative = api.client.get(f"/v1/jobs/{job_id}/export?step=-1", headers=alice)
    assert negative.status_code == 422 and negative.json()["error"]["details"][0]["field"] == "step"


def test_a_failed_jobs_latest_checkpoint_exports(api: ApiHarness) -> None:
    """A job that failed after checkpointing exports the weights it had then (issue 26:
    any state), as the files the worker's export would write."""
    from core import repositories
    from core.models import JobStatus

    _, alice = api.make_user()
    spec = digits_spec()
    job_id = api.client.post("/v1/jobs", json=spec, headers=alice).json()["id"]
    net = trained_network(spec, seed=3)
    write_checkpoint(api, job_id, 100, net)
    with api.sessions() as session:
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.RUNNING)
        repositories.transition_job(session, job_id=job_id, to_status=JobStatus.FAILED)
        session.commit()
    assert api.client.get(f"/v1/jobs/{job_id}", headers=alice).json()["status"] == "failed"
    listed = api.client.get(f"/v1/jobs/{job_id}/export", headers=alice)
    assert listed.status_code == 200, listed.text
    assert listed.json()["step"] == 100
    expected = mxnet_files(net)
    for item in listed.json()["files"]:
        assert api.client.get(item["url"], headers=alice).content == expected[item["name"]]
