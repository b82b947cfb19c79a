"""Run ``rudder.validate_dataset`` on one data set in this process and print, as JSON,
its outcome and this process's resident memory before and at its peak during the
validation. Run as ``python -m tests.workers.datasets.measure_validation DATASET_ID``
with the worker's RUDDER_* environment (tests and bench/dataset_validation.py)."""

from __future__ import annotations

import json
import os
import sys
import time

from tests.rss import peak_rss_bytes, reset_peak, rss_bytes
from workers.datasets.validate import validate_dataset
from workers.resources import get_store


def main() -> None:
    store = get_store()
    reset_peak(os.getpid())
    before = rss_bytes(os.getpid())
    started = time.perf_counter()
    status = validate_dataset(sys.argv[1], store)
    seconds = time.perf_counter() - started
    print(json.dumps({"status": status, "rss_before": before,
                      "rss_peak": peak_rss_bytes(os.getpid()), "seconds": seconds}))


if __name__ == "__main__":
    main()
