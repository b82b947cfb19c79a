"""The engine's CPU threads at run time: compiled kernels over a fixed partition, a pool for
independent tasks, and BLAS kept from oversubscribing either.

Three things compute on the engine's ``count()`` threads (engine.threads decides the
count; :func:`set_count` changes it):

- **Compiled kernels** (:func:`kernel`): each is written once with ``numba.prange`` over
  *blocks* whose bounds depend only on the shapes (rows of tiles, images, fixed-size row
  blocks), never on the thread count, and compiled twice: serially and with numba's
  parallel loops. Each block writes only its own outputs, and a reduction keeps one partial
  per block that the kernel adds up in block order afterwards, so the floats are the same
  for 1 thread or 64. The parallel build runs on numba's OpenMP layer (or TBB): both are
  safe when several threads call in, unlike numba's default ``workqueue`` layer, which is
  never used (without a safe layer every kernel runs its serial build). While deferred
  work (:func:`defer`) holds the other threads, a kernel whose items are independent
  (``rows``) runs its serial build on slices, as tasks, which a thread joins when its
  deferred task ends; others run serially then.
- **Tasks** (:func:`run_tasks`): independent pieces of a layer, mostly GEMMs (the 36
  transform-domain products of a Winograd layer, its weight- and data-gradient products
  side by side, an im2col layer's blocks of images; engine.ndarray.gemm), run on a
  persistent pool of ``count() - 1`` Python threads plus the caller; numpy releases the GIL
  in a GEMM and numba kernels are ``nogil``. OpenBLAS stays at one thread (engine.threads),
  so each task's GEMM runs on the thread that took it, with no lock (OpenBLAS serializes
  concurrent multi-threaded GEMMs on one lock) and no second set of threads competing for
  the cores; a pool thread waits blocked, not spinning.
- **Inside a task** every kernel runs its serial build (no nested teams).

A process forked after the OpenMP threads started (GNU OpenMP is not fork-safe) runs the
serial builds from then on; one forked before keeps the parallel ones.

>>> import numpy as np
>>> from engine.ndarray import cpu_kernels   # a kernel: add_relu over blocks of elements
>>> out = np.empty(10, np.float32)
>>> cpu_kernels.add_relu(np.arange(10, dtype=np.float32), np.full(10, -5, np.float32), out)
>>> out.tolist()[4:7], count() >= 1, block_count(10, 4)
([0.0, 0.0, 1.0], True, 3)
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import logging
import os
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy

from .. import threads as config

try:  # numba is a runtime dependency; without it every op keeps its numpy path
    import numba

    ENABLED = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None
    ENABLED = False

__all__ = ["ENABLED", "JIT_OPTIONS", "Ticket", "block_count", "count", "defer", "deferring",
           "drain", "kernel", "numba", "parallel_kernels", "parallel_threads", "pending", "prange",
           "run_tasks", "set_count", "submit"]

# every compiled kernel: cached on disk, releasing the GIL, numpy's float semantics
JIT_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy",
                               "boundscheck": False}

log = logging.getLogger(__name__)

prange = numba.prange if ENABLED else range

_count = config.decision().threads
_local = threading.local()  # .in_task: inside a task; .numba_threads: numba's count here
_parallel_state = {"checked": False, "usable": False, "started": False}
_state_lock = threading.Lock()


def count() -> int:
    """The threads the engine computes with."""
    return _count


def set_count(threads: int) -> None:
    """Compute with ``threads`` threads from now on (kernels and tasks; results stay the
    same for any count). A worker calls this with the cores it was given."""
    global _count
    if int(threads) < 1:
        raise ValueError(f"thread count must be >= 1, got {threads}")
    with _state_lock:
        _count = int(threads)


def parallel_kernels() -> bool:
    """Whether the kernels' parallel builds can run here (a thread-safe numba layer loads)."""
    return ENABLED and _parallel_usable()


def block_count(size: int, block: int) -> int:
    """Blocks of ``block`` items covering ``size`` (the last one may be short)."""
    return (size + block - 1) // block


# --------------------------------------------------------------------- compiled kernels
def _parallel_usable() -> bool:
    """Whether a thread-safe numba threading layer loads here (checked once)."""
    state = _parallel_state
    if state["checked"]:
        return bool(state["usable"])
    with _state_lock:
        if not state["checked"]:
            if os.environ.get("NUMBA_THREADING_LAYER", "") in ("", "default", "workqueue"):
                numba.config.THREADING_LAYER = "threadsafe"  # tbb or omp, never workqueue
            # OpenMP's threads spin only briefly (OMP_SPIN_COUNT) before they sleep, at a
            # parallel loop's end and between loops, unless the environment says otherwise
            # (OMP_WAIT_POLICY or GOMP_SPINCOUNT). Set only while the OpenMP runtime loads
            # (it reads them then), so child processes do not inherit them.
            wait_unset = not any(v in os.environ for v in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))
            if wait_unset:
                os.environ["GOMP_SPINCOUNT"] = str(OMP_SPIN_COUNT)
            try:
                _probe(numpy.zeros(4))
                state["usable"] = True
                state["started"] = True
            except Exception as exc:  # noqa: BLE001 - no safe layer: serial builds
                log.warning("engine kernels run on one thread: %s", exc)
            finally:
                if wait_unset:
                    os.environ.pop("GOMP_SPINCOUNT", None)
            state["checked"] = True
    return bool(state["usable"])


# How long an OpenMP thread spins before it sleeps (GNU OpenMP's spin iterations: pause
# instructions, tens of microseconds at most here), at the barrier that ends a parallel loop
# (the thread done first waits for the other) and for the next loop. Sleeping at once
# (OMP_WAIT_POLICY=PASSIVE, as before) costs a futex wake-up of ~40 us on a 2-vCPU AMD EPYC
# VM at each, and BatchNorm's passes come in pairs tens of microseconds apart. Paired rounds
# at 2 threads on a Genoa VM (bench/engine_ab.py, GOMP_SPINCOUNT against PASSIVE): CNN
# 0.956-0.981 for 1,000-10,000 (0.98 at 1,000), ResNet-18 0.979, resnet18_v1 0.995
# (neutral); the process's CPU time per step did not grow (the spin fills what was idle).
# Spinning without end (libgomp's default 300,000 iterations, or ACTIVE) took 5x the CPU
# time of a CNN step on a loaded 2-core machine and starved the threads it waited for.
OMP_SPIN_COUNT = 1000


def _numba_threads(threads: int) -> None:
    """Make numba's (per calling thread) count ``threads`` (at most what numba started)."""
    wanted = min(threads, numba.config.NUMBA_NUM_THREADS)
    if getattr(_local, "numba_threads", None) != wanted:
        numba.set_num_threads(wanted)
        _local.numba_threads = wanted


class Kernel:
    """A compiled kernel with a serial and a parallel build of the same source; one with
    ``rows`` (see :func:`kernel`) can also run its serial build on slices, as tasks."""

    def __init__(self, fn: Callable[..., Any], rows: Sequence[str] = ()) -> None:
        self.__wrapped__ = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.serial = numba.njit(**JIT_OPTIONS)(fn) if ENABLED else fn
        self._parallel: Any = None
        names = list(inspect.signature(fn).parameters)
        unknown = [name for name in rows if name not in names]
        if unknown:
            raise ValueError(f"{fn.__name__}: rows names no argument {unknown}")
        self._rows = tuple(names.index(name) for name in rows)

    @property
    def parallel(self) -> Any:
        if self._parallel is None:
            # a renamed copy: numba caches builds by qualified name, and the two must not
            # overwrite each other's cache entries
            clone = types.FunctionType(self.__wrapped__.__code__, self.__wrapped__.__globals__,
                                       self.__name__ + "_parallel",
                                       self.__wrapped__.__defaults__,
                                       self.__wrapped__.__closure__)
            clone.__qualname__ = self.__wrapped__.__qualname__ + "_parallel"
            clone.__module__ = self.__wrapped__.__module__
            self._parallel = numba.njit(parallel=True, **JIT_OPTIONS)(clone)
        return self._parallel

    def __call__(self, *args: Any) -> Any:
        if _shareable(args):
            threads = _free_threads()
            if threads > 1:
                _numba_threads(threads)
                return self.parallel(*args)
            if self._rows:  # deferred work holds every other thread, for a while
                return self._in_slices(args)
        return self.serial(*args)

    def _in_slices(self, args: tuple[Any, ...]) -> None:
        """Run the serial build on slices of the ``rows`` arguments, as tasks: this thread
        starts on them, and each pool thread joins when its deferred task ends (a parallel
        build would have to wait for it, or oversubscribe the cores until then)."""
        rows = args[self._rows[0]].shape[0]
        largest = max(getattr(a, "size", 0) for a in args)
        pieces = max(1, min(SLICE_PIECES, rows, largest // SLICE_MIN_ELEMENTS))
        bounds = [rows * i // pieces for i in range(pieces + 1)]

        def piece(lo: int, hi: int) -> Callable[[], None]:
            sliced = list(args)
            for i in self._rows:
                sliced[i] = args[i][lo:hi]
            return lambda: self.serial(*sliced)

        run_tasks([piece(lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)])


def parallel_threads(args: tuple[Any, ...]) -> int:
    """How many threads a kernel called now with ``args`` runs its parallel build on; 1: its
    serial build (or its slices, see :func:`kernel`)."""
    threads = _free_threads()
    return threads if threads > 1 and _shareable(args) else 1


def _free_threads() -> int:
    """The threads not busy with deferred work, queued work counted as taken (a pool thread
    takes it at once), so the threads never outnumber the cores."""
    return _count - min(_pool.deferred_left, _count - 1)


def _shareable(args: tuple[Any, ...]) -> bool:
    """Whether a kernel called now with ``args`` may use other threads than this one: more
    than one thread, not inside a task, large enough, and a thread-safe numba layer."""
    return _count > 1 and ENABLED and not getattr(_local, "in_task", False) \
        and _large(args) and _parallel_usable()


# Fewest elements in a kernel's largest array for its parallel build; the floats are the
# same either way. Below it, waking the sleeping OpenMP threads costs about what they save:
# 5-20 us on an idle Intel VM, ~40 us on a 2-vCPU AMD EPYC VM (an empty 2-thread launch:
# 41.8 us, against 1.6 us with spinning threads). Measured on that AMD VM with the threads
# idle before each call, as in a training step (serial/parallel us): a 2^17-element
# BatchNorm statistics pass 33/181, ReLU 20/35; 2^19: 110/123, 61/78; 2^20: 222/228,
# 154/176; F(4x4) input transform at 2^18.2 (ResNet's 8x8 maps) 118/180, at 2^20.2
# 692/613. With those sleeping threads 2^19 kept most of that loss off a training step
# (resnet18_v1 at 2 threads 1.08x faster than with 2^17 in paired rounds, the CNN the
# same). Since the threads spin briefly before they sleep (OMP_SPIN_COUNT), a kernel that
# follows another often finds them awake: 2^18 against 2^19 in paired rounds on a Genoa VM
# gave ResNet-18 (batch 16, whose 16x16 maps are 2^18) 0.977x and 0.981x, the CNN
# 0.990x and 0.998x, resnet18_v1 0.999x; 2^17 gave ResNet-18 1.006x.
PARALLEL_MIN_ELEMENTS = 1 << 18


def _large(args: tuple[Any, ...]) -> bool:
    return any(getattr(a, "size", 0) >= PARALLEL_MIN_ELEMENTS for a in args)


# A kernel run in slices (Kernel._in_slices): at most this many, each with at least this
# many elements in the largest argument's share. The slices' calls cost ~5 us each; a pool
# thread joins between slices, so they are a fraction of the kernel (2^21 elements of a
# CNN's first BatchNorm + max-pool: 8 slices of 8 images).
SLICE_PIECES = 8
SLICE_MIN_ELEMENTS = 1 << 16


def kernel(fn: Callable[..., Any] | None = None, *,
           rows: Sequence[str] = ()) -> Any:
    """Compile ``fn`` (written with :data:`prange` over a fixed partition) twice: see above.

    ``rows`` names the arguments whose first axis indexes independent items (images, matrix
    rows): each item of an output is computed from the same item of the inputs alone, so
    the kernel gives the same floats on slices of them. While deferred work holds the other
    threads such a kernel runs in slices as tasks instead of serially (``@kernel(rows=...)``)."""
    if fn is None:
        return lambda f: Kernel(f, rows)
    return Kernel(fn, rows)


def _probe_source(values: Any) -> None:
    for i in prange(len(values)):
        values[i] = float(i)


_probe = numba.njit(parallel=True, cache=False)(_probe_source) if ENABLED else _probe_source


# -------------------------------------------------------------------------------- BLAS
def _hold_blas_at_one_thread() -> None:
    """OpenBLAS on one thread (see engine.threads), where it may have loaded with more."""
    if not config.decision().blas_preset:
        return
    try:
        from threadpoolctl import ThreadpoolController

        for lib in ThreadpoolController().select(user_api="blas").lib_controllers:
            lib.set_num_threads(1)
    except Exception as exc:  # noqa: BLE001 - cannot hold it: results may vary with BLAS
        log.warning("could not hold BLAS at one thread: %s", exc)


_hold_blas_at_one_thread()


# ------------------------------------------------------------------------------- tasks
class _Job:
    """One call's tasks, taken in order by whichever thread is free."""

    def __init__(self, tasks: Sequence[Callable[[], None]]) -> None:
        self.tasks = tasks
        self.next = 0
        self.left = len(tasks)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def work(self) -> None:
        while True:
            with self.lock:
                i = self.next
                if i >= len(self.tasks):
                    return
                self.next = i + 1
            try:
                self.tasks[i]()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                with self.lock:
                    self.error = self.error or exc
            with self.lock:
                self.left -= 1
                if self.left == 0:
                    self.done.set()


class _Pool:
    """Persistent threads that wait (blocked) for a job and help run its tasks, and in
    between run the deferred tasks (:func:`defer`) queued for them."""

    def __init__(self) -> None:
        self._setup()
        self._threads: list[threading.Thread] = []
        self._stop: threading.Event = threading.Event()

    def _setup(self) -> None:
        lock = threading.Lock()
        self._wake = threading.Condition(lock)
        self._drained = threading.Condition(lock)  # the deferred queue emptied
        self._job: _Job | None = None
        self._serial = 0
        self.busy = threading.Lock()  # one job at a time; others run their tasks inline
        self._deferred: collections.deque[Callable[[], None]] = collections.deque()
        self.deferred_left = 0  # queued or running; read without the lock (an int)
        self._deferred_error: BaseException | None = None

    def resize(self, workers: int) -> None:
        if workers == len(self._threads):
            return
        with self._wake:
            self._stop.set()
            self._wake.notify_all()
            self._stop = threading.Event()
            self._threads = [threading.Thread(target=self._loop, args=(self._stop,),
                                              name=f"rudder-engine-{i + 1}", daemon=True)
                             for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _loop(self, stop: threading.Event) -> None:
        _local.in_task = True
        seen = self._serial
        while True:
            task = job = None
            with self._wake:
                while self._serial == seen and not self._deferred and not stop.is_set():
                    self._wake.wait()
                if stop.is_set():
                    return
                if self._serial != seen:  # a job first: its caller waits for it
                    seen, job = self._serial, self._job
                else:
                    task = self._deferred.popleft()
            if job is not None:
                job.work()
            elif task is not None:
                self._run_deferred(task)

    def run(self, tasks: Sequence[Callable[[], None]]) -> None:
        job = _Job(tasks)
        with self._wake:
            self._job = job
            self._serial += 1
            self._wake.notify_all()
        _local.in_task = True
        try:
            job.work()
            job.done.wait()
        finally:
            _local.in_task = False
            with self._wake:
                self._job = None
        if job.error is not None:
            raise job.error

    # ------------------------------------------------------------------ deferred tasks
    def defer(self, task: Callable[[], None]) -> None:
        with self._wake:
            self._deferred.append(task)
            self.deferred_left += 1
            self._wake.notify()

    def take(self, task: Callable[[], None]) -> bool:
        """Take ``task`` off the deferred queue (the caller holds ``_wake`` and runs it with
        :meth:`_run_deferred`); False when a thread already took it."""
        try:
            self._deferred.remove(task)
        except ValueError:
            return False
        return True

    def _run_deferred(self, task: Callable[[], None]) -> None:
        try:
            task()
        except BaseException as exc:  # noqa: BLE001 - re-raised by drain()
            with self._wake:
                self._deferred_error = self._deferred_error or exc
        finally:
            with self._wake:
                self.deferred_left -= 1
                if self.deferred_left == 0:
                    self._drained.notify_all()

    def drain(self) -> None:
        """Help with the deferred tasks still queued, wait for the running ones, and raise
        the first error any of them raised."""
        while True:
            with self._wake:
                task = self._deferred.popleft() if self._deferred else None
                if task is None:
                    while self.deferred_left:
                        self._drained.wait()
                    error, self._deferred_error = self._deferred_error, None
                    break
            self.run_here(task)
        if error is not None:
            raise error

    def run_here(self, task: Callable[[], None]) -> None:
        """Run a deferred task taken off the queue on the calling thread, as a pool thread
        would: its kernels and products on this thread alone."""
        nested = getattr(_local, "in_task", False)
        _local.in_task = True
        try:
            self._run_deferred(task)
        finally:
            _local.in_task = nested

    def after_fork(self) -> None:
        self._threads = []
        self._setup()


_pool = _Pool()


def run_tasks(tasks: Sequence[Callable[[], None]]) -> None:
    """Run independent ``tasks`` (each writes only its own outputs) on the engine's threads
    and return when all are done; the first exception is raised here. Which thread runs a
    task never changes what it computes, so results do not depend on the thread count."""
    if _count <= 1 or len(tasks) <= 1 or getattr(_local, "in_task", False) \
            or not _pool.busy.acquire(blocking=False):
        for task in tasks:  # one thread, nested, or another job running: inline, in order
            task()
        return
    try:
        _pool.resize(_count - 1)  # started on first use, resized after set_count
        _pool.run(tasks)
    finally:
        _pool.busy.release()


def _after_fork_in_child() -> None:
    global _local
    _local = threading.local()
    _pool.after_fork()
    if _parallel_state["started"]:  # GNU OpenMP hangs in a child of a process that used it
        _parallel_state.update(checked=True, usable=False)


# RUDDER_ENGINE_DEFER=off runs every weight gradient in its layer's backward, as before
# deferring existed (for comparing the two, bench/engine_ab.py, or ruling it out)
_DEFER_SETTING = os.environ.get("RUDDER_ENGINE_DEFER", "on").strip().lower()
if _DEFER_SETTING not in ("on", "off"):
    raise ValueError(f"RUDDER_ENGINE_DEFER={_DEFER_SETTING!r}: expected on or off")
DEFER = _DEFER_SETTING == "on"


def _declines() -> bool:
    """Whether work handed to another thread runs here instead: deferral off, one thread,
    outside a :func:`deferring` block, or inside a task (no nested hand-offs)."""
    return not DEFER or _count <= 1 or not getattr(_local, "deferring", False) \
        or getattr(_local, "in_task", False)


def defer(task: Callable[[], None], writes: Any) -> bool:
    """Queue ``task``, which fills the array ``writes``, to run on a pool thread while this
    thread goes on, inside a :func:`deferring` block and with more than one thread; True
    when it was queued (else the caller runs it itself). Whoever may read ``writes`` (or a
    view of it) before the block ends asks :func:`pending` first and drains. One deferred
    task per array."""
    if _declines():
        return False
    _pool.resize(_count - 1)
    key = id(_root(writes))

    def fill() -> None:
        try:
            task()
        finally:
            with _pool._wake:  # written (or failed: drain raises)
                _pending[key] -= 1
                if not _pending[key]:
                    del _pending[key]

    with _pool._wake:
        _pending[key] += 1
    _pool.defer(fill)
    return True


# ids of the arrays deferred tasks are still filling, with how many tasks fill each (the
# gradient buffers of a Trainer's parameters are views of one array: their tasks share it)
_pending: collections.Counter[int] = collections.Counter()


class Ticket:
    """A task queued by :func:`submit`; :meth:`result` gives what it returned."""

    __slots__ = ("_fn", "_done", "_value", "_error", "run")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn = fn
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self.run = self._run  # one bound method: the queue entry, found again by identity

    def _run(self) -> None:
        # its error is kept for result() alone: a result nobody takes cannot fail the block
        try:
            self._value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised by result()
            self._error = exc
        finally:
            self._fn = None  # type: ignore[assignment]
            self._done.set()

    def result(self) -> Any:
        """The task's return value (or its exception, raised here): taken off the queue and
        run on this thread when no thread has started it yet, else waited for."""
        with _pool._wake:
            queued = _pool.take(self.run)
        if queued:
            _pool.run_here(self.run)
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


def submit(fn: Callable[[], Any]) -> Ticket | None:
    """Queue ``fn`` (reading only what nothing changes before its result is taken) for a
    pool thread, inside a :func:`deferring` block and with more than one thread, and return
    its :class:`Ticket`; None where :func:`defer` would decline (the caller runs it when it
    needs it). The block's end waits for it, taken or not."""
    if _declines():
        return None
    _pool.resize(_count - 1)
    ticket = Ticket(fn)
    _pool.defer(ticket.run)
    return ticket


def _root(array: Any) -> Any:
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


def pending(array: Any) -> bool:
    """Whether a deferred task may still be writing ``array`` (or what it is a view of)."""
    return bool(_pending) and id(_root(array)) in _pending


@contextlib.contextmanager
def deferring() -> Iterator[None]:
    """A block in which :func:`defer` may queue work; on leaving it (normally or by an
    exception) every deferred task has finished, and the first error one raised is raised
    (a block inside another drains too: what follows it may read what it deferred).

    A backward pass runs in one: each layer's weight gradient, which nothing else in the
    backward reads, is queued while this thread goes on with the data gradients, so the
    other threads fill the time they would otherwise wait between the data-gradient path's
    small parallel pieces (a compiled kernel's parallel build takes only the threads not
    running deferred work, so the threads never outnumber the cores). The floats do not
    change: the same products, run on another thread."""
    outer = getattr(_local, "deferring", False)
    _local.deferring = True
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        _local.deferring = outer
        try:
            drain()
        except BaseException:
            if not failed:
                raise


def drain() -> None:
    """Wait until every deferred task has finished (helping with the queued ones); raise
    the first error one raised."""
    if _pool.deferred_left:
        _pool.drain()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
