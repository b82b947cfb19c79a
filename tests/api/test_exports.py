"""GET /v1/jobs/{id}/export: a succeeded job's network as MXNet files (issue 12)."""

from __future__ import annotations

from core.storage import MODEL_PARAMS_FILE, MODEL_SYMBOL_FILE, job_export_prefix, open_store
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness


def test_the_export_lists_and_streams_both_files_only_to_the_owner(api: ApiHarness) -> None:
    _, alice = api.make_user()
    _, bob = api.make_user()
    job_id = api.client.post("/v1/jobs", json=digits_spec(), headers=alice).json()["id"]
    response = api.client.get(f"/v1/jobs/{job_id}/export", headers=alice)
    assert response.status_code == 404 and "written when a job succeeds" in response.text

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
