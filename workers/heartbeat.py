"""A worker process's heartbeat: queues served, current job, CPU/memory (GPU when present).

Published through :class:`core.channel.Channel` every few seconds by a daemon thread in
the process that trains (a Celery pool child, or the worker itself with the solo pool),
so it knows the job it is running. The api's System view lists the live ones.

>>> beat = collect(worker_id="w1", queues=["cpu"], current_job_id=None)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.channel import Channel
from core.events import GpuUsage, WorkerHeartbeat

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 5.0
TTL_SECONDS = 20  # a worker missing four beats is gone

_current_job: str | None = None
_current_rank: tuple[int, int] | None = None  # (rank, ranks) in a job on several workers
_beater: Heartbeat | None = None


@contextmanager
def working_on(job_id: str) -> Iterator[None]:
    """Marks the job this process is training, for its heartbeats."""
    global _current_job, _current_rank
    _current_job = job_id
    try:
        yield
    finally:
        _current_job = None
        _current_rank = None


def training_as_rank(rank: int, ranks: int) -> None:
    """This process trains its job as ``rank`` of ``ranks`` (until the job ends)."""
    global _current_rank
    _current_rank = (rank, ranks)


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat; None elsewhere."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return sum(values) - idle, sum(values)


def _memory() -> tuple[int | None, int | None]:
    """(used, total) bytes of the machine from /proc/meminfo; Nones elsewhere."""
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None, None
    info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in lines if ":" in line}
    total, available = info.get("MemTotal"), info.get("MemAvailable")
    if total is None or available is None:
        return None, total
    return total - available, total


_nvml_ready: bool | None = None  # None until the first try: NVML is initialised once


def _visible(index: int, uuid_: str) -> bool:
    """Whether CUDA_VISIBLE_DEVICES (indices or UUIDs) lets this process use the GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return True
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    return str(index) in wanted or any(uuid_.startswith(v) for v in wanted if v.startswith("GPU-"))


def _nvml_gpus() -> list[GpuUsage] | None:
    """Name, utilisation and memory of the GPUs this process may use, from the driver's
    NVML (nvidia-ml-py). None where there is no driver: then cupy is asked instead."""
    global _nvml_ready
    try:
        import pynvml
    except ImportError:
        return None
    if _nvml_ready is None:
        try:
            pynvml.nvmlInit()
            _nvml_ready = True
        except pynvml.NVMLError:
            _nvml_ready = False
    if not _nvml_ready:
        return None
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            if not _visible(index, str(pynvml.nvmlDeviceGetUUID(handle))):
                continue
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            busy = pynvml.nvmlDeviceGetUtilizationRates(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(GpuUsage(
                name=name.decode() if isinstance(name, bytes) else str(name),
                utilization_percent=float(busy.gpu),
                memory_used_bytes=int(memory.used), memory_total_bytes=int(memory.total),
            ))
        return gpus
    except pynvml.NVMLError:
        return None


def _cupy_gpus() -> list[GpuUsage]:
    """GPU memory through cupy, only if this process already uses it (never initialises
    CUDA just to report); cupy knows no utilisation."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return []
    gpus = []
    for index in range(cupy.cuda.runtime.getDeviceCount()):
        with cupy.cuda.Device(index):
            free, total = cupy.cuda.runtime.memGetInfo()
        name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
        gpus.append(GpuUsage(
            name=name.decode() if isinstance(name, bytes) else str(name),
            memory_used_bytes=int(total - free), memory_total_bytes=int(total),
        ))
    return gpus


def _gpus() -> list[GpuUsage]:
    try:
        gpus = _nvml_gpus()
        return gpus if gpus is not None else _cupy_gpus()
    except Exception:  # noqa: BLE001 - a report must never take the worker down
        return []


class Heartbeat:
    """Publishes this process's :class:`WorkerHeartbeat` until stopped."""

    def __init__(self, channel: Channel, *, queues: list[str],
                 interval_seconds: float = INTERVAL_SECONDS) -> None:
        self.pid = os.getpid()
        self.worker_id = f"{socket.gethostname()}:{self.pid}:{uuid.uuid4().hex[:6]}"
        self._channel = channel
        self._queues = sorted(queues)
        self._interval = interval_seconds
        self._previous_cpu = _cpu_times()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rudder-heartbeat", daemon=True)

    def collect(self) -> WorkerHeartbeat:
        cpu = _cpu_times()
        percent = None
        if cpu is not None and self._previous_cpu is not None:
            busy, total = (now - before for now, before in zip(cpu, self._previous_cpu,
                                                                  strict=True))
            percent = round(100.0 * busy / total, 1) if total > 0 else None
        self._previous_cpu = cpu
        used, total_memory = _memory()
        return WorkerHeartbeat(
            worker_id=self.worker_id, hostname=socket.gethostname(), queues=self._queues,
            current_job_id=_current_job, rank=_current_rank[0] if _current_rank else None,
            ranks=_current_rank[1] if _current_rank else None,
            cpu_percent=percent, memory_used_bytes=used,
            memory_total_bytes=total_memory, gpus=_gpus(), time=time.time(),
        )

    def beat(self) -> None:
        self._channel.publish_heartbeat(self.collect(), ttl_s=TTL_SECONDS)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=self._interval + 5)
        try:
            self._channel.remove_heartbeat(self.worker_id)
        except Exception:  # noqa: BLE001 - Redis may be gone at shutdown; the TTL cleans up
            log.debug("could not remove the heartbeat of %s", self.worker_id)

    def _run(self) -> None:
        while True:
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - keep beating; Redis may come back
                log.warning("worker heartbeat failed", exc_info=True)
            if self._stop.wait(self._interval):
                return


def start_heartbeat(channel: Channel, queues: list[str]) -> None:
    """Start this process's heartbeat once (a forked pool child starts its own)."""
    global _beater
    if _beater is not None and _beater.pid == os.getpid():
        return
    _beater = Heartbeat(channel, queues=queues)
    _beater.start()


def stop_heartbeat() -> None:
    global _beater
    if _beater is not None:
        _beater.stop()
        _beater = None
