"""The Python client's steering calls (issue 24): step-boundary commands, rollback, fork
and lineage. :class:`rudder.client.Client` has them; they are kept apart to keep that
module small."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class SteeringCalls:
    """Mixed into :class:`rudder.client.Client` (which provides ``_request``)."""

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    def send_command(self, job_id: str, command: dict[str, Any]) -> Any:
        """A step-boundary command (``{"type": "set_hyperparameters", "wd": 1e-4}``, ...);
        answers ``{command_id, status: "pending", ...}``."""
        return self._request("POST", f"/v1/jobs/{job_id}/commands", json=command)

    def command(self, job_id: str, command_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}/commands/{command_id}")

    def commands(self, job_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}/commands")

    def hyperparameters(self, job_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}/hyperparameters")

    def rollback(self, job_id: str, step: int, checkpoint_before: bool = False) -> Any:
        return self._request("POST", f"/v1/jobs/{job_id}/rollback",
                             json={"step": step, "checkpoint_before": checkpoint_before})

    def fork(self, job_id: str, step: int | None = None,
             overrides: dict[str, Any] | None = None) -> Any:
        body: dict[str, Any] = {"overrides": overrides or {}}
        if step is not None:
            body["step"] = step
        return self._request("POST", f"/v1/jobs/{job_id}/fork", json=body)

    def lineage(self, job_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}/lineage")

    def timeline(self, job_id: str) -> Any:
        """Every command, status change and checkpoint on the step axis."""
        return self._request("GET", f"/v1/jobs/{job_id}/timeline")

    def abandoned_points(self, job_id: str, branch: int | None = None) -> Iterator[Any]:
        """The metric points rollbacks set aside, following ``next_cursor``."""
        cursor = None
        while True:
            params = {k: v for k, v in {"branch": branch, "cursor": cursor}.items()
                      if v is not None}
            page = self._request("GET", f"/v1/jobs/{job_id}/metrics/abandoned", params=params)
            yield from page["points"]
            cursor = page.get("next_cursor")
            if not cursor:
                return
