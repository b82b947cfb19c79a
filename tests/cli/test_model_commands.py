"""``rudder model upload|ls|show|rm`` against the test server (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

from tests import model_files
from tests.cli.conftest import Cli


def test_model_upload_ls_show_and_rm(cli: Cli, tmp_path: Path) -> None:
    symbol, params = tmp_path / "net-symbol.json", tmp_path / "net-0000.params"
    symbol.write_bytes(model_files.symbol_json())
    params.write_bytes(model_files.params_file())
    uploaded = cli("model", "upload", str(symbol), "--params", str(params),
                   "--input-shape", "1,64")
    assert uploaded.returncode == 0, uploaded.stderr
    assert "254 parameters" in uploaded.stdout and "with its params" in uploaded.stdout
    model_id = uploaded.stdout.split()[1].rstrip(":")
    listed = cli("model", "ls")
    assert model_id[:8] in listed.stdout and "1x64" in listed.stdout
    shown = json.loads(cli("model", "show", model_id[:8]).stdout)
    assert shown["ops"]["elemwise_add"] == 1 and shown["output_shapes"] == [[1, 10]]
    assert cli("model", "rm", model_id[:8]).returncode == 0
    assert model_id[:8] not in cli("model", "ls").stdout


def test_a_refused_upload_says_why_in_one_line(cli: Cli, tmp_path: Path) -> None:
    symbol = tmp_path / "net-symbol.json"
    symbol.write_bytes(model_files.symbol_json())
    refused = cli("model", "upload", str(symbol), "--input-shape", "1,65")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: symbol:") and "422" in refused.stderr
    missing = cli("model", "upload", str(tmp_path / "nope.json"), "--input-shape", "1,64")
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_export_downloads_both_mxnet_files(cli: Cli, tmp_path: Path) -> None:
    from core.storage import job_export_prefix, open_store

    job_id = cli.submit()
    missing = cli("export", job_id[:8], "--out", str(tmp_path))
    assert missing.returncode == 1 and "no checkpoint to export yet" in missing.stderr
    assert len(missing.stderr.splitlines()) == 1, missing.stderr
    store = open_store(cli.api.settings.storage_url)
    files = {"model-symbol.json": b'{"nodes": []}', "model-0000.params": bytes(range(200))}
    for name, data in files.items():  # what the worker writes when the job succeeds
        store.put(job_export_prefix(job_id) + name, data)
    done = cli("export", job_id[:8], "--out", str(tmp_path / "trained"))
    assert done.returncode == 0, done.stderr
    for name, data in files.items():
        assert (tmp_path / "trained" / name).read_bytes() == data
    assert "SymbolBlock.imports" in done.stdout


def test_export_of_a_cancelled_job_at_a_kept_step(cli: Cli, tmp_path: Path) -> None:
    """Issue 26: `rudder export JOB --step S` for a job that did not succeed; a step with
    no kept checkpoint says which steps are kept, once."""
    from tests.api.checkpoint_files import mxnet_files, trained_network, write_checkpoint
    from tests.api.specs import digits_spec

    job_id = cli.submit()
    nets = {200: trained_network(digits_spec(), seed=3), 400: trained_network(digits_spec(), 4)}
    for step, net in nets.items():
        write_checkpoint(cli.api, job_id, step, net)
    assert cli("cancel", job_id[:8]).returncode == 0
    for args, step in ((["--step", "200"], 200), ([], 400)):
        out = tmp_path / str(step)
        done = cli("export", job_id[:8], *args, "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert f"the network at step {step}:" in done.stdout
        for name, data in mxnet_files(nets[step]).items():
            assert (out / name).read_bytes() == data
    refused = cli("export", job_id[:8], "--step", "300", "--out", str(tmp_path / "x"))
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("error: step: no kept checkpoint at step 300; kept "
                                      "steps: 200, 400 (404 not_found)")
