"""``rudder datasets upload`` in parts, with resume (issue 13), against the test server."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from core.storage import open_store
from rudder.client import Client
from rudder.dataset_commands import _state_file
from tests.cli.conftest import Cli


@pytest.fixture
def cache(cli: Cli, tmp_path: Path) -> Path:
    cli.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return tmp_path / "cache"


def test_an_interrupted_recordio_upload_resumes_with_the_missing_parts(
    cli: Cli, cache: Path, tmp_path: Path
) -> None:
    rec, idx = tmp_path / "train.rec", tmp_path / "train.idx"
    rec.write_bytes(os.urandom(10_000))
    idx.write_bytes(b"0\t0\n")
    # An earlier run created the upload and sent two parts before it was interrupted.
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        with Client(cli.api.url, token=cli.env["RUDDER_TOKEN"]) as client:
            upload = client.create_upload("train", [("train.rec", 10_000), ("train.idx", 4)],
                                          part_size=4096)
            client.put_part(upload["id"], 1, rec.read_bytes()[:4096])
            client.put_part(upload["id"], 4, idx.read_bytes())
            state = _state_file(client.url, [rec, idx])
        state.parent.mkdir(parents=True)
        state.write_text(f'{{"upload_id": "{upload["id"]}"}}')
    finally:
        del os.environ["XDG_CACHE_HOME"]
    result = cli("datasets", "upload", str(rec), "--name", "train")
    assert result.returncode == 0, result.stderr
    assert f"resuming upload {upload['id']}: 2 of 4 parts to send" in result.stdout
    assert "queued for validation" in result.stdout
    assert not state.exists()
    store = open_store(cli.api.settings.storage_url)
    dataset_id = upload["dataset_id"]
    assert store.get(f"datasets/{dataset_id}/train.rec") == rec.read_bytes()
    shown = cli("datasets", "show", dataset_id[:8])
    assert '"status": "validating"' in shown.stdout and '"format": "recordio"' in shown.stdout
    assert "recordio" in cli("datasets", "ls").stdout


def test_a_rec_without_its_idx_is_a_usage_error(cli: Cli, cache: Path, tmp_path: Path) -> None:
    rec = tmp_path / "lonely.rec"
    rec.write_bytes(b"x")
    result = cli("datasets", "upload", str(rec))
    assert result.returncode == 2 and "lonely.idx is missing" in result.stderr


def test_a_small_csv_can_be_sent_in_parts_too(cli: Cli, cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"x,label\n" + b"1,0\n" * 3000)
    result = cli("datasets", "upload", str(path), "--parts", "--part-size", "5000", "-q")
    assert result.returncode == 0, result.stderr
    dataset_id = result.stdout.strip()
    store = open_store(cli.api.settings.storage_url)
    assert store.get(f"datasets/{dataset_id}/t.csv") == path.read_bytes()


def test_upload_says_truthfully_whether_validation_is_queued_or_running(
    cli: Cli, cache: Path, tmp_path: Path
) -> None:
    """Issue 26 item 3: "a worker is validating it" was printed while the set sat in the
    training queue. Now the data set says whether a validator took it up."""
    from core import repositories
    from rudder.dataset_commands import validation_state

    path = tmp_path / "t.csv"
    path.write_bytes(b"x,label\n" + b"1,0\n" * 3000)
    # No validator serves this test server: the set stays queued.
    result = cli("datasets", "upload", str(path), "--parts", "--part-size", "5000",
                 "--wait", "1")
    assert result.returncode == 0, result.stderr
    assert "queued for validation (no validator has taken it up yet)" in result.stdout
    assert "a worker is validating it" not in result.stdout
    dataset_id = result.stdout.split("uploaded ", 1)[1].split(";", 1)[0]
    with cli.api.sessions() as session:  # what a validator does when it takes it up
        repositories.mark_validation_started(session, dataset_id=dataset_id)
        session.commit()
    shown = json.loads(cli("datasets", "show", dataset_id[:8]).stdout)
    assert (shown["status"], shown["validation"]) == ("validating", "running")
    assert validation_state(shown).startswith("a validator is checking it (for ")


def test_rudder_usage_shows_bytes_by_kind_against_the_quota(
    cli: Cli, cache: Path, tmp_path: Path
) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"x,label\n" + b"1,0\n" * 3000)
    assert cli("datasets", "upload", str(path), "--parts", "--part-size", "5000",
               "-q").returncode == 0
    shown = cli("usage")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    table = [re.split(r"\s{2,}", line.strip()) for line in lines[:6]]
    assert table[0] == ["KIND", "BYTES", "SIZE", "QUOTA"]
    assert table[1] == ["data sets", str(path.stat().st_size), "11.7 KiB", "counted"]
    assert table[4] == ["checkpoints", "0", "0 B", "not counted"]
    assert lines[-1] == "used 11.7 KiB of 50.0 GiB (0.0%); 50.0 GiB left"
    as_json = json.loads(cli("usage", "--json").stdout)
    assert as_json["bytes"]["datasets"] == path.stat().st_size == as_json["used_bytes"]
