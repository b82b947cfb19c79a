"""Schemathesis (pinned in the dev extra) against the real app on uvicorn, on SQLite and on
PostgreSQL (issue 14): every generated request, valid or hostile, gets an answer the
OpenAPI document declares, and none is a server error.

It runs Schemathesis's own command line, as a user of the API would, with checks
``not_a_server_error`` and ``status_code_conformance`` (issue 14's two numbers) plus the
ones about content types, response schemas and headers, and 405s with a true ``Allow``.
(``positive_data_acceptance`` is left out: the document is looser than validation in
places, e.g. ``status`` is a free string refused unless it names a status.) Path ids come from real
jobs in each status most of the time, so the generated bodies and queries reach the
services rather than stopping at a 404. The seed is fixed so a failure reproduces;
``RUDDER_SCHEMATHESIS_SEED`` and ``RUDDER_SCHEMATHESIS_EXAMPLES`` explore further.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from core import repositories
from core.models import JobStatus
from tests.api.specs import digits_spec
from tests.conftest import ApiHarness

EXAMPLES = int(os.environ.get("RUDDER_SCHEMATHESIS_EXAMPLES", "10"))
SEED = os.environ.get("RUDDER_SCHEMATHESIS_SEED", "14")
CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance,response_headers_conformance,allow_header_conformance,"
          "missing_required_header,unsupported_method")


def _jobs_in_every_status(api: ApiHarness, headers: dict[str, str]) -> list[str]:
    ids = []
    for status in (None, JobStatus.RUNNING, JobStatus.PAUSED, JobStatus.SUCCEEDED):
        response = api.client.post("/v1/jobs", json=digits_spec(), headers=headers)
        job_id = str(response.json()["id"])
        if status is not None:
            with api.sessions() as session:
                assert repositories.transition_job(session, job_id=job_id, to_status=status)
                session.commit()
        ids.append(job_id)
    return ids


def _config(job_ids: list[str], other_token: str) -> str:
    quoted = ", ".join(f'"{i}"' for i in job_ids)
    # DELETE /v1/tokens/{id} runs as another user: the stateful phase would otherwise
    # follow GET /v1/tokens to revoke the very token the run uses, and every later
    # request would be a 401.
    return f"""
[dictionaries.jobs]
values = [{quoted}]

[parameters]
"path.job_id" = {{ dictionary = "jobs", probability = 0.8 }}

[[operations]]
include-path = "/v1/tokens/{{token_id}}"
headers = {{ Authorization = "Bearer {other_token}" }}
"""


def test_generated_requests_get_no_server_error_and_no_undocumented_status(
    api: ApiHarness, tmp_path: Path
) -> None:
    _, headers = api.make_user()
    _, other = api.make_user()
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(_jobs_in_every_status(api, headers),
                              other["Authorization"].removeprefix("Bearer ")))
    result = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
         f"{api.url}/openapi.json", "--header", f"Authorization: {headers['Authorization']}",
         "--checks", CHECKS, "--max-examples", str(EXAMPLES), "--seed", SEED,
         "--workers", "1", "--request-timeout", "20", "--warnings", "off"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    output = result.stdout + result.stderr
    failures = output[output.find("FAILURES"):] if "FAILURES" in output else output[-4000:]
    assert result.returncode == 0, failures
    counts = re.search(r"(\d+) generated, (\d+) passed", output)
    assert counts is not None, output[-4000:]
    generated, passed = map(int, counts.groups())
    assert generated == passed and generated >= 20 * EXAMPLES, output[-2000:]
