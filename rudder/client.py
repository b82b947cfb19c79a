"""A small Python client for Rudder's REST API (the CLI is built on it).

>>> from rudder import Client
>>> client = Client("http://127.0.0.1:8000", token="rdr_...")      # doctest: +SKIP
>>> job = client.submit(yaml.safe_load(open("examples/digits-mlp.yaml")))  # doctest: +SKIP
>>> client.set_learning_rate(job["id"], 0.0005)                     # doctest: +SKIP
>>> for event in client.events(job["id"]): print(event.type, event.data)  # doctest: +SKIP

Configuration comes from arguments or the environment: ``RUDDER_URL`` (default
``http://127.0.0.1:8000``) and ``RUDDER_TOKEN``. The token travels only in the
``Authorization`` header, never in a URL.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from rudder.steer_client import SteeringCalls

DEFAULT_URL = "http://127.0.0.1:8000"
# Completing a chunked upload joins (and re-reads) every part: minutes for tens of GB.
COMPLETE_TIMEOUT_SECONDS = 1800.0
# Exporting a checkpoint: the api's inspector may first start (loading the engine), then
# make the network and convert its parameters.
EXPORT_TIMEOUT_SECONDS = 300.0


class RudderError(Exception):
    """An error answer from the API: HTTP status plus the body's ``error`` object."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def _retry_after(response: httpx.Response, default: float = 1.0) -> float:
    """The answer's ``Retry-After`` in seconds (a number; anything else: ``default``)."""
    try:
        return min(max(float(response.headers.get("retry-after", default)), 0.1), 30.0)
    except ValueError:
        return default


@dataclass(frozen=True)
class ServerEvent:
    """One Server-Sent Event: ``id`` is the stream id to resume after."""

    id: str | None
    type: str
    data: Any


def parse_sse(lines: Iterator[str], keepalives: bool = False) -> Iterator[ServerEvent]:
    """Decode an SSE stream's lines into events (retries are skipped; comments too, unless
    ``keepalives``: then each comment is a ``keepalive`` event)."""
    event_id: str | None = None
    event_type = "message"
    data: list[str] = []
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                text = "\n".join(data)
                try:
                    payload: Any = json.loads(text)
                except ValueError:
                    payload = text
                yield ServerEvent(id=event_id, type=event_type, data=payload)
            event_type, data = "message", []
            continue
        if line.startswith(":"):
            if keepalives and not data:
                yield ServerEvent(id=event_id, type="keepalive", data=None)
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "id":
            event_id = value
        elif name == "event":
            event_type = value
        elif name == "data":
            data.append(value)


class Client(SteeringCalls):
    """Synchronous client; every method returns the decoded JSON body or raises RudderError."""

    def __init__(self, url: str | None = None, token: str | None = None,
                 timeout: float = 30.0) -> None:
        self.url = (url or os.environ.get("RUDDER_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("RUDDER_TOKEN")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing
    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        return self._decode(response)

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        if response.status_code >= 400:
            try:
                error = response.json().get("error", {})
            except ValueError:
                error = {}
            raise RudderError(
                response.status_code,
                str(error.get("code") or response.reason_phrase),
                str(error.get("message") or response.text[:500]),
                error.get("details"),
            )
        if not response.content:
            return None
        return response.json()

    # ------------------------------------------------------------ jobs
    def submit(self, spec: dict[str, Any], idempotency_key: str | None = None) -> Any:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._request("POST", "/v1/jobs", json=spec, headers=headers)

    def list_jobs(self, status: str | None = None, limit: int | None = None,
                  cursor: str | None = None) -> Any:
        params = {k: v for k, v in
                  {"status": status, "limit": limit, "cursor": cursor}.items() if v is not None}
        return self._request("GET", "/v1/jobs", params=params)

    def get_job(self, job_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}")

    def pause(self, job_id: str) -> Any:
        return self._request("POST", f"/v1/jobs/{job_id}/pause")

    def resume(self, job_id: str) -> Any:
        return self._request("POST", f"/v1/jobs/{job_id}/resume")

    def cancel(self, job_id: str) -> Any:
        return self._request("POST", f"/v1/jobs/{job_id}/cancel")

    def delete_job(self, job_id: str) -> Any:
        """Delete a finished job, its history and its checkpoints (409 while it runs)."""
        return self._request("DELETE", f"/v1/jobs/{job_id}")

    def all_jobs(self, status: str | None = None, page_size: int = 200) -> Iterator[Any]:
        """Every job of the caller, newest first, following ``next_cursor``."""
        cursor = None
        while True:
            page = self.list_jobs(status=status, limit=page_size, cursor=cursor)
            yield from page.get("data", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def set_learning_rate(self, job_id: str, learning_rate: float,
                          mode: str | None = None) -> Any:
        body: dict[str, Any] = {"learning_rate": learning_rate}
        if mode:
            body["mode"] = mode
        return self._request("PUT", f"/v1/jobs/{job_id}/learning-rate", json=body)

    def learning_rate(self, job_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}/learning-rate")

    def metrics(self, job_id: str, after_step: int | None = None,
                names: list[str] | None = None, *, limit: int | None = None,
                cursor: str | None = None) -> Any:
        """One page of metric history (``next_cursor`` continues it); see
        :meth:`metric_points` for all of it."""
        params: dict[str, Any] = {}
        if after_step is not None:
            params["after_step"] = after_step
        if names:
            params["names"] = ",".join(names)
        if limit is not None:
            params["limit"] = limit
        if cursor is not None:
            params["cursor"] = cursor
        return self._request("GET", f"/v1/jobs/{job_id}/metrics", params=params)

    def metric_points(self, job_id: str, after_step: int | None = None,
                      names: list[str] | None = None,
                      page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """Every stored point in (step, name) order, following the pages' cursors."""
        cursor = None
        while True:
            page = self.metrics(job_id, after_step, names, limit=page_size, cursor=cursor)
            yield from page["points"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def checkpoints(self, job_id: str) -> Any:
        return self._request("GET", f"/v1/jobs/{job_id}/checkpoints")

    def download_checkpoint(self, job_id: str, step: int, file: str, dest: Path) -> Path:
        """Save one checkpoint file (``params.npz``, ``trainer.npz``, ``meta.json``)."""
        return self._download(f"/v1/jobs/{job_id}/checkpoints/{step}/files/{file}", dest)

    def _download(self, path: str, dest: Path) -> Path:
        with self._http.stream("GET", path) as response:
            if response.status_code >= 400:
                response.read()
                self._decode(response)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "wb") as handle:
                for chunk in response.iter_bytes():
                    handle.write(chunk)
        return dest

    # ------------------------------------------------------------ datasets
    def upload_dataset(self, path: Path, name: str | None = None) -> Any:
        with open(path, "rb") as handle:
            files = {"file": (path.name, handle, "application/octet-stream")}
            data = {"name": name} if name else {}
            return self._request("POST", "/v1/datasets", files=files, data=data)

    def datasets(self) -> Any:
        return self._request("GET", "/v1/datasets")

    def dataset(self, dataset_id: str) -> Any:
        """One data set with its status (validating, ready, invalid + reason) and stats."""
        return self._request("GET", f"/v1/datasets/{dataset_id}")

    def create_upload(self, name: str, files: list[tuple[str, int]],
                      part_size: int | None = None) -> Any:
        """Start a chunked upload of ``(file name, size)`` files; the answer numbers the
        parts (``files[i].first_part`` .. ``+ parts - 1``, ``part_size`` bytes each)."""
        body: dict[str, Any] = {"name": name,
                                "files": [{"path": p, "size": n} for p, n in files]}
        if part_size is not None:
            body["part_size"] = part_size
        return self._request("POST", "/v1/datasets/uploads", json=body)

    def upload_state(self, upload_id: str) -> Any:
        """Which parts arrived (``received``) and which are ``missing``."""
        return self._request("GET", f"/v1/datasets/uploads/{upload_id}")

    def put_part(self, upload_id: str, number: int, data: bytes) -> Any:
        digest = hashlib.sha256(data).hexdigest()
        return self._request("PUT", f"/v1/datasets/uploads/{upload_id}/parts/{number}",
                             content=data, headers={"X-Part-SHA256": digest})

    def complete_upload(self, upload_id: str) -> Any:
        """Join the parts; returns the data set, ``validating`` until a validator checked
        it. Joining reads every part back (its sha256 is checked), so a large upload may
        take a while: the read timeout here is long."""
        return self._request("POST", f"/v1/datasets/uploads/{upload_id}/complete",
                             timeout=httpx.Timeout(30.0, read=COMPLETE_TIMEOUT_SECONDS))

    def abort_upload(self, upload_id: str) -> Any:
        return self._request("DELETE", f"/v1/datasets/uploads/{upload_id}")

    def send_parts(self, upload: dict[str, Any], paths: dict[str, Path],
                   on_part: Callable[[int], None] | None = None,
                   connections: int = 2) -> None:
        """Send every part the upload is missing, read from ``paths`` (by file name), over
        ``connections`` parallel requests (so at most that many parts are in memory);
        ``on_part(bytes)`` after each."""
        size = int(upload["part_size"])
        missing = set(upload["missing"])
        todo = [(paths[planned["path"]], int(planned["first_part"]) + index, index * size)
                for planned in upload["files"] for index in range(int(planned["parts"]))
                if int(planned["first_part"]) + index in missing]

        def send(item: tuple[Path, int, int]) -> int:
            path, number, offset = item
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(size)
            self.put_part(upload["id"], number, data)
            return len(data)

        pool = ThreadPoolExecutor(max(1, connections), thread_name_prefix="rudder-upload")
        try:
            for sent in pool.map(send, todo):
                if on_part is not None:
                    on_part(sent)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # stop sending the rest
            raise
        pool.shutdown()

    def delete_dataset(self, dataset_id: str) -> Any:
        """Delete an uploaded data set (409 while a queued or running job uses it)."""
        return self._request("DELETE", f"/v1/datasets/{dataset_id}")

    def usage(self) -> Any:
        """Your stored bytes by kind against your quota (``GET /v1/usage``)."""
        return self._request("GET", "/v1/usage")

    # ------------------------------------------------------------ models
    def upload_model(self, symbol: Path, input_shape: str, params: Path | None = None,
                     name: str | None = None, input_name: str | None = None) -> Any:
        """Upload an MXNet ``-symbol.json`` (+ ``.params``); the api checks it first."""
        with contextlib.ExitStack() as stack:
            files = {"symbol": (symbol.name, stack.enter_context(open(symbol, "rb")),
                                "application/json")}
            if params is not None:
                files["params"] = (params.name, stack.enter_context(open(params, "rb")),
                                   "application/octet-stream")
            data = {"input_shape": input_shape}
            data |= {k: v for k, v in (("name", name), ("input_name", input_name)) if v}
            return self._request("POST", "/v1/models", files=files, data=data)

    def models(self) -> Any:
        return self._request("GET", "/v1/models")

    def get_model(self, model_id: str) -> Any:
        return self._request("GET", f"/v1/models/{model_id}")

    def delete_model(self, model_id: str) -> Any:
        """Delete an uploaded model (409 while a queued, running or paused job uses it)."""
        return self._request("DELETE", f"/v1/models/{model_id}")

    def export(self, job_id: str, step: int | None = None) -> Any:
        """The job's network at a kept checkpoint as MXNet files (``step`` None: the
        export of a succeeded job, else the latest checkpoint):
        ``{step, files: [{name, size, url}]}``. The first request for a checkpoint makes
        the files (seconds for a large network): the read timeout here is long."""
        params = {} if step is None else {"step": step}
        return self._request("GET", f"/v1/jobs/{job_id}/export", params=params,
                             timeout=httpx.Timeout(30.0, read=EXPORT_TIMEOUT_SECONDS))

    def download_export(self, job_id: str, file: str, dest: Path,
                        step: int | None = None) -> Path:
        """Save ``model-symbol.json`` or ``model-0000.params`` of the job's export (of the
        checkpoint at ``step``: see :meth:`export`)."""
        query = "" if step is None else f"?step={step}"
        return self._download(f"/v1/jobs/{job_id}/export/{file}{query}", dest)

    def download_url(self, url: str, dest: Path) -> Path:
        """Save a file the API listed by its ``url`` (an export's, a checkpoint's)."""
        return self._download(url, dest)

    # ------------------------------------------------------------ tokens
    def tokens(self) -> Any:
        """The caller's tokens (revoked and expired ones too); ``current`` marks this one."""
        return self._request("GET", "/v1/tokens")

    def revoke_token(self, token_id: str) -> Any:
        """Revoke one of the caller's tokens; it stops working at once."""
        return self._request("DELETE", f"/v1/tokens/{token_id}")

    # ------------------------------------------------------------ live events
    def events(self, job_id: str, last_event_id: str | None = None,
               timeout: float | None = None,
               keepalives: bool = False,
               unavailable_patience: float = 60.0) -> Iterator[ServerEvent]:
        """Stream a job's events; reconnects with Last-Event-ID when the server closes.

        Stops after a terminal ``status`` event (succeeded, failed, cancelled). With
        ``keepalives`` the server's idle comments come through as ``keepalive`` events: the
        server sends one only when the stream has caught up (nothing more is queued).
        While the API answers 503 (its Redis restarting, say) this waits as its
        ``Retry-After`` says and tries again, for up to ``unavailable_patience`` seconds
        in a row before raising.
        """
        unavailable_since: float | None = None
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_event_id:
                headers["Last-Event-ID"] = last_event_id
            read_timeout = httpx.Timeout(10.0, read=timeout)
            with self._http.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers,
                                   timeout=read_timeout) as response:
                if response.status_code == 503:
                    response.read()
                    now = time.monotonic()
                    unavailable_since = unavailable_since or now
                    wait = _retry_after(response)
                    if now + wait - unavailable_since <= unavailable_patience:
                        time.sleep(wait)
                        continue
                if response.status_code >= 400:
                    response.read()
                    self._decode(response)
                unavailable_since = None
                for event in parse_sse(response.iter_lines(), keepalives):
                    if event.id:
                        last_event_id = event.id
                    yield event
                    if event.type == "status" and isinstance(event.data, dict) and \
                            event.data.get("status") in ("succeeded", "failed", "cancelled"):
                        return
