"""What a worker's heartbeat says about the GPUs (the System view's GPU column)."""

from __future__ import annotations

import pytest

from engine import backend
from workers import heartbeat


def test_a_machine_without_a_gpu_driver_reports_no_gpus() -> None:
    if backend.gpu_count() > 0:
        pytest.skip("this machine has a GPU")
    assert heartbeat._gpus() == []


@pytest.mark.gpu
@pytest.mark.skipif(backend.gpu_count() == 0, reason="needs cupy and a CUDA GPU")
def test_a_gpu_worker_reports_name_utilisation_and_memory_from_nvml(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import cupy

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    held = cupy.empty(256 * 2**20, dtype=cupy.uint8)  # 256 MiB this process holds
    gpus = heartbeat._gpus()
    assert len(gpus) == cupy.cuda.runtime.getDeviceCount()
    for gpu in gpus:
        assert gpu.name and "NVIDIA" in gpu.name.upper()
        assert gpu.utilization_percent is not None and 0 <= gpu.utilization_percent <= 100
        assert gpu.memory_total_bytes
        assert 256 * 2**20 <= (gpu.memory_used_bytes or 0) <= gpu.memory_total_bytes
    del held
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a worker given no GPU reports none
    assert heartbeat._gpus() == []
