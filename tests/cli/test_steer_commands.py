"""``rudder set|schedule|freeze|unfreeze|eval|checkpoint|rules|rollback|fork|...``: the real
entry point against the test server; the worker's confirmation is played through the
repositories (the worker itself: tests/e2e/test_steering.py)."""

from __future__ import annotations

import threading
import time

from core import repositories
from core.models import JobStatus
from tests.api.test_commands import PARAMETERS
from tests.cli.conftest import Cli


def _running(cli: Cli) -> str:
    job_id = cli.submit()
    cli.set_status(job_id, JobStatus.RUNNING, publish=False)
    with cli.api.sessions() as session:
        repositories.set_job_parameters(session, job_id=job_id, parameters=PARAMETERS)
        session.commit()
    return job_id


def _confirm_soon(cli: Cli, job_id: str, step: int) -> threading.Thread:
    """What the worker does at its next step boundary: confirm what is pending."""
    def confirm() -> None:
        for _ in range(100):
            time.sleep(0.1)
            with cli.api.sessions() as session:
                pending = repositories.list_commands(session, job_id=job_id,
                                                     statuses=["pending"])
                for row in pending:
                    repositories.mark_command_applied(session, command_id=row.id,
                                                      applied_step=step, result=row.params)
                session.commit()
                if pending:
                    return
    thread = threading.Thread(target=confirm, daemon=True)
    thread.start()
    return thread


def test_set_waits_for_the_step_and_names_a_refused_field(cli: Cli) -> None:
    job_id = _running(cli)
    refused = cli("set", job_id[:8], "wd=1e-4", "momentum=0.95")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: momentum: adam has no parameter momentum")
    assert cli("set", job_id, "wd=abc").returncode == 2  # a usage mistake, nothing sent
    confirming = _confirm_soon(cli, job_id, 77)
    result = cli("set", job_id, "wd=1e-4", "beta2=0.99", "--wait", "10")
    confirming.join()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("set_hyperparameters ") and lines[0].endswith(": pending")
    assert lines[1] == "applied at step 77: wd=0.0001, beta2=0.99"
    shown = cli("hyperparameters", job_id)
    # lr: the job's recorded lr, its warmup's start (no worker here updates it)
    assert "adam: lr=0, wd=0.0001, beta1=0.9, beta2=0.99" in shown.stdout
    assert "step 77  set_hyperparameters" in shown.stdout


def test_freeze_eval_checkpoint_rules_and_schedule_are_sent(cli: Cli, tmp_path: object) -> None:
    job_id = _running(cli)
    for args in (("freeze", job_id, "net_dense0_"), ("unfreeze", job_id, "net_dense0_w"),
                 ("eval", job_id), ("checkpoint", job_id),
                 ("schedule", job_id, "poly", "max_update=500", "pwr=2", "--lr", "0.01")):
        result = cli(*args)
        assert result.returncode == 0 and result.stdout.strip().endswith(": pending"), (
            args, result.stderr)
    refused = cli("freeze", job_id, "conv.*")
    assert refused.returncode == 1 and "error: pattern: matches no trainable" in refused.stderr
    rules = cli("rules", job_id, "-", input="- {type: early_stop, patience: 2}\n")
    assert rules.returncode == 0, rules.stderr
    kinds = [c["kind"] for c in cli.api.client.get(f"/v1/jobs/{job_id}/commands",
                                                   headers=cli.headers).json()["data"]]
    assert kinds == ["freeze", "unfreeze", "evaluate", "checkpoint", "set_schedule",
                     "set_rules"]


def test_fork_and_rollback_refusals_are_one_line(cli: Cli) -> None:
    job_id = _running(cli)
    forked = cli("fork", job_id, "--set", "optimizer.momentum=0.9")
    assert forked.returncode == 1 and "no checkpoint yet" in forked.stderr
    rolled = cli("rollback", job_id, "100")
    assert rolled.returncode == 1 and "error: step: the job has no checkpoint" in rolled.stderr
    lineage = cli("lineage", job_id)
    assert lineage.returncode == 0 and "no parent, no children" in lineage.stdout
