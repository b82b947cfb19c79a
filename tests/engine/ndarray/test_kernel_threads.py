"""The engine's threads: reductions split the same way for any thread count, the task pool,
and where the thread count comes from (engine.threads, engine.ndarray.kernel_threads)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from engine import threads
from engine.ndarray import batch_norm_kernels, conv_kernels, cpu_kernels, gemm, kernel_threads

rng = np.random.default_rng(7)


@pytest.fixture
def thread_counts(every_kernel_parallel):
    """Runs a callable at 1, 2 and 3 threads and gives back its three results; above 1
    thread every kernel takes its parallel build, whatever the arrays' size."""
    before = kernel_threads.count()

    def run(fn):
        out = []
        for count in (1, 2, 3):
            kernel_threads.set_count(count)
            out.append(fn())
        return out

    yield run
    kernel_threads.set_count(before)


def _equal_bytes(results):
    return all(np.asarray(r).tobytes() == np.asarray(results[0]).tobytes() for r in results)


def test_batch_norm_sums_come_out_the_same_in_float64(thread_counts):
    """The float64 sums (before any rounding to float32 could hide a difference) are equal
    to the bit, and the max-pool-fused backward's sums equal the unfused ones."""
    n, h, w, c = 16, 32, 24, 24
    x = rng.standard_normal((n * h * w, c)).astype(np.float32) + 3
    g = rng.standard_normal((n, h // 2, w // 2, c)).astype(np.float32)
    arg = rng.integers(0, 4, g.shape).astype(np.uint8)
    block = batch_norm_kernels.block_rows(x.shape[0], c, 2 * w)
    assert 1 < block < x.shape[0] // 2  # several blocks, so the split matters
    mean, inv_std = x.mean(0).astype(np.float32), np.ones(c, np.float32)
    scale, beta = np.full(c, 0.5, np.float32), np.zeros(c, np.float32)

    def stats():
        m, v = np.empty(c), np.empty(c)
        batch_norm_kernels.channel_stats(x, block, m, v)
        return np.concatenate([m, v])

    def fused_sums():
        s1, s2 = np.empty(c), np.empty(c)
        batch_norm_kernels.normalize_max_pool_grad_sums(
            g, arg, x.reshape(n, h, w, c), mean, inv_std, scale, beta, True, block // (2 * w),
            s1, s2)
        return np.concatenate([s1, s2])

    def unfused_sums():  # the pooled gradient scattered to its windows, then the plain sums
        full = np.zeros((n, h, w, c), np.float32)
        for k in range(4):
            di, dj = divmod(k, 2)
            full[:, di::2, dj::2] = np.where(arg == k, g, 0)
        s1, s2 = np.empty(c), np.empty(c)
        batch_norm_kernels.normalize_grad_sums(full.reshape(-1, c), x, mean, inv_std, scale,
                                               beta, True, block, s1, s2)
        return np.concatenate([s1, s2])

    assert _equal_bytes(thread_counts(stats))
    fused = thread_counts(fused_sums)
    assert _equal_bytes(fused)
    assert fused[0].tobytes() == unfused_sums().tobytes()
    np.testing.assert_allclose(stats()[:c], x.astype(np.float64).mean(0), rtol=1e-12)


def test_bias_gradient_sums_blocks_in_order(thread_counts):
    g = rng.standard_normal((5 * conv_kernels.BIAS_BLOCK_ROWS + 17, 16)).astype(np.float32)

    def column_sums():
        out = np.empty(16)  # float64 out: the float64 sums themselves, unrounded
        conv_kernels.bias_grad(g, out)
        return out

    results = thread_counts(column_sums)
    assert _equal_bytes(results)
    np.testing.assert_allclose(results[0], g.astype(np.float64).sum(0), rtol=1e-12)


def test_split_products_are_the_same_for_any_thread_count(thread_counts):
    a = rng.standard_normal((1500, 300)).astype(np.float32)
    b = rng.standard_normal((300, 700)).astype(np.float32)
    long_a = rng.standard_normal((20, 3 * gemm.K_BLOCK)).astype(np.float32)
    long_b = rng.standard_normal((3 * gemm.K_BLOCK, 30)).astype(np.float32)
    assert len(gemm._grid(a, b, np.empty((1500, 700), np.float32))) > 2
    assert _equal_bytes(thread_counts(lambda: gemm.matmul(a, b)))
    assert _equal_bytes(thread_counts(lambda: gemm.matmul_k(long_a, long_b)))
    np.testing.assert_allclose(gemm.matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gemm.matmul_k(long_a, long_b), long_a @ long_b, rtol=1e-3,
                               atol=1e-3)


def test_more_than_two_row_blocks_come_in_fours_that_two_and_four_threads_share_evenly():
    assert [len(gemm.bounds(size, 100, balanced=True)) for size in (150, 250, 350, 550, 850)] \
        == [1, 2, 4, 8, 8]
    assert len(gemm.bounds(3, 1, balanced=True)) == 3  # never more blocks than rows
    assert len(gemm.bounds(350, 100)) == 3
    blocks = gemm.bounds(350, 100, balanced=True)
    assert blocks[0][0] == 0 and blocks[-1][1] == 350
    assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    # the network input layer's product that ran as 3 blocks (1.2 ms on 2 threads, 0.9 as 4)
    assert len(gemm._blocks(65536, 27, 32)) == 4


@pytest.mark.parametrize("planes, rows, inner, cols", [(36, 128, 64, 64), (16, 7, 33, 5),
                                                      (2, 300, 40, 20)])
def test_plane_products_are_numpys_batched_product_for_any_thread_count(
        thread_counts, planes, rows, inner, cols):
    a = rng.standard_normal((planes, rows, inner)).astype(np.float32)
    b = rng.standard_normal((planes, cols, inner)).astype(np.float32).transpose(0, 2, 1)
    results = thread_counts(lambda: gemm.planes(a, b, np.empty((planes, rows, cols),
                                                               np.float32)))
    assert _equal_bytes(results)
    assert results[0].tobytes() == np.matmul(a, b).tobytes()  # one call: the same floats
    kernel_threads.set_count(3)
    assert len(gemm.planes_tasks(a, b, results[0])) == min(3, planes)


def test_tasks_run_on_several_threads_and_raise_the_first_error(thread_counts):
    kernel_threads.set_count(3)
    seen: set[int] = set()
    barrier = threading.Barrier(2, timeout=10)

    def meet() -> None:  # two tasks that can only finish together: two threads ran them
        seen.add(threading.get_ident())
        barrier.wait()

    kernel_threads.run_tasks([meet, meet])
    assert len(seen) == 2

    def fail() -> None:
        raise ValueError("task failed")

    with pytest.raises(ValueError, match="task failed"):
        kernel_threads.run_tasks([lambda: None, fail, lambda: None])
    order: list[int] = []  # a task's own tasks run inline, in order
    kernel_threads.run_tasks([lambda: kernel_threads.run_tasks(
        [lambda: order.append(1), lambda: order.append(2)]), lambda: None])
    assert order == [1, 2]


def test_thread_count_setting_and_its_errors(monkeypatch):
    monkeypatch.setenv("RUDDER_ENGINE_THREADS", "3")
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert threads._from_environment(threads.os.environ).threads == 3
    monkeypatch.delenv("RUDDER_ENGINE_THREADS")
    assert threads._from_environment(threads.os.environ).reason == "OMP_NUM_THREADS=5"
    monkeypatch.setenv("OMP_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="OMP_NUM_THREADS='two'"):
        threads._from_environment(threads.os.environ)
    monkeypatch.delenv("OMP_NUM_THREADS")
    cores, how = threads.available_cores()
    assert threads._from_environment(threads.os.environ).threads == cores >= 1 and how
    assert threads.cores_from_quota("250000 100000") == 2
    assert threads.cores_from_quota("50000 100000") == 1
    assert threads.cores_from_quota("max 100000") is None
    with pytest.raises(ValueError, match=">= 1"):
        kernel_threads.set_count(0)
    assert threads.describe().startswith("engine threads: ")


def test_cgroup_quotas_v2_and_v1_the_tightest_along_the_hierarchy(tmp_path, monkeypatch):
    """A container's CPU quota (or its parent's, where tighter) caps the thread count."""
    proc = tmp_path / "cgroup"
    monkeypatch.setattr(threads, "_PROC_CGROUP", proc)
    monkeypatch.setattr(threads, "_CGROUP", tmp_path / "fs")
    job = tmp_path / "fs" / "jobs" / "worker"
    job.mkdir(parents=True)
    (tmp_path / "fs" / "cgroup.controllers").write_text("cpu memory")
    (tmp_path / "fs" / "jobs" / "cpu.max").write_text("300000 100000\n")
    (job / "cpu.max").write_text("max 100000\n")
    proc.write_text("0::/jobs/worker\n")
    assert threads._cgroup_quota() == 3  # the parent's 3 CPUs bind the unlimited child
    (job / "cpu.max").write_text("150000 100000\n")
    assert threads._cgroup_quota() == 1
    v1 = tmp_path / "fs" / "cpu,cpuacct" / "docker" / "abc"
    v1.mkdir(parents=True)
    (tmp_path / "fs" / "cgroup.controllers").unlink()
    (v1 / "cpu.cfs_quota_us").write_text("400000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    proc.write_text("4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n")
    assert threads._cgroup_quota() == 4
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads._cgroup_quota() is None
    proc.write_text("garbage\n")
    assert threads._cgroup_quota() is None


def test_weight_gradient_copies_give_numpys_assignment_on_any_thread_count(thread_counts):
    """cpu_kernels.assign: a convolution's channels-last weight gradient seen channels-first
    (a transposed view) goes through a compiled transpose; a big plain copy through blocks
    on the engine's threads; anything else as numpy assigns. The values are numpy's."""
    stored = rng.standard_normal((64, 3, 3, 48)).astype(np.float32)
    plain = rng.standard_normal((1000, 64, 3, 3)).astype(np.float32)  # 2.3 MB: blocks
    cases = [stored.transpose(0, 3, 1, 2), plain, plain[:, :5],  # the last one is small
             rng.standard_normal((4, 7, 5)).astype(np.float32).transpose(0, 2, 1),
             rng.standard_normal((6, 5, 3, 3))]  # float64: numpy's own copy

    def copies():
        out = []
        for value in cases:
            target = np.empty(value.shape, value.dtype)
            cpu_kernels.assign(target, value)
            np.testing.assert_array_equal(target, value)
            out.append(target)
        return np.concatenate([t.ravel().astype(np.float64) for t in out])

    assert _equal_bytes(thread_counts(copies))


def test_deferred_tasks_run_beside_the_caller_and_are_done_when_the_block_ends():
    before = kernel_threads.count()
    kernel_threads.set_count(2)
    try:
        caller = threading.get_ident()
        started, release = threading.Event(), threading.Event()
        ran: list[int] = []
        out = np.zeros(4)

        def slow() -> None:  # holds its thread until the caller has seen it start
            ran.append(threading.get_ident())
            started.set()
            assert release.wait(10)
            out[:] = 1.0

        with kernel_threads.deferring():
            assert kernel_threads.defer(slow, out)
            assert kernel_threads.pending(out[1:])  # a view of it is pending too
            assert not kernel_threads.pending(np.zeros(4))
            assert started.wait(10)  # another thread took it while the caller went on
            release.set()
        assert ran == [ran[0]] and ran[0] != caller
        assert out.tolist() == [1.0] * 4 and not kernel_threads.pending(out)

        queued = []  # the caller takes queued tasks itself when the block ends
        with kernel_threads.deferring():
            for i in range(6):
                assert kernel_threads.defer(lambda i=i: queued.append(i), out)
        assert sorted(queued) == list(range(6))

        def fail() -> None:
            raise ValueError("deferred task failed")

        with pytest.raises(ValueError, match="deferred task failed"):
            with kernel_threads.deferring():
                kernel_threads.defer(fail, out)
        with kernel_threads.deferring():  # the error was raised once, not kept
            kernel_threads.defer(lambda: None, out)
    finally:
        kernel_threads.set_count(before)


def test_defer_declines_outside_a_block_on_one_thread_and_inside_a_task():
    before = kernel_threads.count()
    out = np.zeros(1)
    try:
        kernel_threads.set_count(2)
        assert not kernel_threads.defer(lambda: None, out)  # no block: the caller runs it
        inner: list[bool] = []
        with kernel_threads.deferring():
            kernel_threads.run_tasks([lambda: inner.append(kernel_threads.defer(
                lambda: None, out)), lambda: None])
        assert inner == [False]  # a task's own work stays on its thread
        kernel_threads.set_count(1)
        with kernel_threads.deferring():
            assert not kernel_threads.defer(lambda: None, out)
    finally:
        kernel_threads.set_count(before)


def test_a_kernel_runs_in_slices_that_a_thread_joins_when_its_deferred_work_ends(
        every_kernel_parallel, monkeypatch):
    """While deferred work holds the other thread, a kernel with ``rows`` runs its serial
    build on slices as tasks (not serially on the caller alone): the pool thread takes the
    slices left once its deferred task ends, and the floats are the serial build's."""
    before = kernel_threads.count()
    a = rng.standard_normal(1 << 20).astype(np.float32)
    b = rng.standard_normal(1 << 20).astype(np.float32)
    want = np.empty_like(a)
    cpu_kernels.add_relu.serial(a, b, want)
    release = threading.Event()
    jobs: list[list[int]] = []
    run_tasks = kernel_threads.run_tasks

    def recording(tasks):
        ran: list[int] = []
        jobs.append(ran)

        def slowly(task):  # the first slice lets the deferred task end
            def run():
                ran.append(threading.get_ident())
                release.set()
                task()
                threading.Event().wait(0.02)  # time for the pool thread to come
            return run

        run_tasks([slowly(t) for t in tasks])

    monkeypatch.setattr(kernel_threads, "run_tasks", recording)
    try:
        kernel_threads.set_count(2)
        out = np.empty_like(a)
        with kernel_threads.deferring():
            assert kernel_threads.defer(lambda: release.wait(10), np.zeros(1))
            while not kernel_threads._pool.deferred_left:
                pass
            cpu_kernels.add_relu(a, b, out)
        assert out.tobytes() == want.tobytes()
        assert len(jobs) == 1 and len(jobs[0]) == kernel_threads.SLICE_PIECES
        assert len(set(jobs[0])) == 2  # the caller and the pool thread shared them
    finally:
        kernel_threads.set_count(before)


def test_rows_must_name_arguments_of_the_kernel():
    with pytest.raises(ValueError, match="rows names no argument"):
        kernel_threads.kernel(rows=("nope",))(lambda x: None)


@pytest.mark.parametrize("environment, expected", [
    ({}, {}),
    ({"OMP_WAIT_POLICY": "PASSIVE"}, {"OMP_WAIT_POLICY": "PASSIVE"}),
    ({"GOMP_SPINCOUNT": "0"}, {"GOMP_SPINCOUNT": "0"}),
])
def test_openmp_wait_settings_are_the_users_or_none_after_loading(
        environment: dict[str, str], expected: dict[str, str]) -> None:
    # The engine's short spin is set only while the OpenMP runtime loads: a user's own
    # setting is left alone, and child processes of the engine inherit nothing of it.
    code = ("import os, json; from engine.ndarray import kernel_threads as kt; "
            "kt.set_count(2); usable = kt.parallel_kernels(); "
            "print(json.dumps([usable, {k: os.environ[k] for k in "
            "('OMP_WAIT_POLICY', 'GOMP_SPINCOUNT') if k in os.environ}]))")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    done = subprocess.run([sys.executable, "-c", code], env={**env, **environment},
                          capture_output=True, text=True, check=True, timeout=120)
    usable, left = json.loads(done.stdout.strip().splitlines()[-1])
    assert usable is True
    assert left == expected
