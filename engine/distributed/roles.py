"""MXNet's launchers start servers and a scheduler next to the workers; Rudder needs neither.

``tools/launch.py`` runs the same script as ``DMLC_ROLE=scheduler``, ``server`` and
``worker``; in MXNet, importing mxnet as a server or scheduler serves until the job ends
and exits. Rudder's workers reduce among themselves (rank 0 hosts the meeting point), so
``import engine`` in those roles exits at once with status 0 and the workers train.
"""

from __future__ import annotations

import os
import sys

IDLE_ROLES = ("server", "scheduler")


def exit_if_not_a_worker() -> None:
    """Exit the process (status 0) when MXNet's launcher started it as server/scheduler."""
    if os.environ.get("DMLC_ROLE", "worker").lower() in IDLE_ROLES:
        sys.exit(0)
