"""Two ranks as two hosts: each in its own network namespace, joined by a veth pair.

Rank 0 listens on its namespace's address only; Gloo must pick the interface that routes
to rank 0 (not the machine's hostname). The link is shaped with ``tc``: a rate limit
(tbf), and delay plus loss (netem) where the kernel has netem. A third namespace with
no link plays a rank that cannot reach the others. Needs root and ``ip netns``; skipped
with the reason otherwise. ~20 s per case on a quiet machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.distributed import launching
from tests.engine.distributed.test_training import SCRIPT, assert_same_weights, reference

pytestmark = pytest.mark.slow


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _netns_unavailable() -> str | None:
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "the `ip`/`tc` tools (iproute2) are not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"rdr{os.getpid()}probe"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"`ip netns add` fails here: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


REASON = _netns_unavailable()


class Hosts:
    """Namespaces ``a`` and ``b`` on one veth link (10.X.Y.1 and .2), ``c`` alone."""

    def __init__(self) -> None:
        tag = f"rdr{os.getpid() % 100000}"
        self.names = {k: f"{tag}{k}" for k in "abc"}
        pid = os.getpid()
        self.subnet = f"10.{200 + pid % 50}.{(pid // 50) % 250}"
        self.address = {"a": f"{self.subnet}.1", "b": f"{self.subnet}.2"}
        self.link = (f"{tag}va", f"{tag}vb")

    def create(self) -> None:
        for name in self.names.values():
            _check(_ip("netns", "add", name))
            _check(_ip("-n", name, "link", "set", "lo", "up"))
        _check(_ip("link", "add", self.link[0], "type", "veth", "peer", "name", self.link[1]))
        for side, dev in zip("ab", self.link, strict=True):
            _check(_ip("link", "set", dev, "netns", self.names[side]))
            _check(_ip("-n", self.names[side], "addr", "add", f"{self.address[side]}/24",
                       "dev", dev))
            _check(_ip("-n", self.names[side], "link", "set", dev, "up"))

    def shape(self, *qdisc: str) -> subprocess.CompletedProcess[str]:
        """Apply a tc qdisc to both ends of the link."""
        done = None
        for side, dev in zip("ab", self.link, strict=True):
            done = subprocess.run(["ip", "netns", "exec", self.names[side], "tc", "qdisc", "add",
                                   "dev", dev, "root", *qdisc], capture_output=True, text=True,
                                  timeout=30)
            if done.returncode != 0:
                return done
        assert done is not None
        return done

    def destroy(self) -> None:
        for name in self.names.values():
            _ip("netns", "del", name)

    def start(self, side: str, rank: int, out: Path, args: list[str],
              timeout: str = "60") -> subprocess.Popen[str]:
        env = launching.job_env(2, 0, 29400, host=self.address["a"],
                                extra={"DMLC_ROLE": "worker", "DMLC_TASK_ID": str(rank),
                                       "RUDDER_DIST_TIMEOUT": timeout})
        return subprocess.Popen(["ip", "netns", "exec", self.names[side], sys.executable,
                                 str(SCRIPT), str(out), *args], env=env, cwd=launching.REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _check(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, f"{done.args}: {done.stderr}"


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if REASON is not None:
        pytest.skip(REASON)
    net = Hosts()
    try:
        net.create()
        yield net
    finally:
        net.destroy()


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    results = []
    for proc in procs:
        try:
            output, _ = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        results.append((proc.returncode, output))
    return results


@pytest.mark.parametrize("link", ["rate-limited", "delay-and-loss"])
def test_two_hosts_train_as_one(hosts: Hosts, tmp_path: Path, link: str) -> None:
    if link == "rate-limited":
        _check(hosts.shape("tbf", "rate", "200mbit", "burst", "64kb", "latency", "50ms"))
    else:
        shaped = hosts.shape("netem", "delay", "3ms", "loss", "1%")
        if shaped.returncode != 0:
            pytest.skip(f"tc netem is not available in this kernel (sch_netem): "
                        f"{shaped.stderr.strip()}")
    args = ["--net", "mlp", "--optimizer", "adam"]
    procs = [hosts.start(side, rank, tmp_path / "two", args)
             for rank, side in enumerate("ab")]
    results = _finish(procs)
    assert all(code == 0 for code, _ in results), results
    ranks = [launching.load(tmp_path / "two" / f"rank{r}.npz") for r in range(2)]
    assert_same_weights(ranks, reference(tmp_path / "one", args))


def test_a_host_without_a_route_fails_within_the_timeout(hosts: Hosts, tmp_path: Path) -> None:
    listening = hosts.start("a", 0, tmp_path, [], timeout="3")
    cut_off = hosts.start("c", 1, tmp_path, [], timeout="3")
    (code0, out0), (code1, out1) = _finish([listening, cut_off])
    assert code1 != 0 and code0 != 0
    assert "RendezvousError: no route to rank 0" in out1 or \
        "RendezvousError: rank 1 could not reach rank 0" in out1, out1[-2000:]
    assert "timed out" in out0, out0[-2000:]  # rank 0 waited 3 s for it, then gave up
