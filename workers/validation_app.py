"""The validator: a Celery worker for the ``datasets`` queue only, so validating an upload
never waits behind a training run (issue 26 item 3). It loads no engine (validation needs
numpy and Pillow only), so it starts fast and stays small. Start it with::

    celery -A workers.validation_app worker -Q datasets --pool=solo --concurrency=1

``rudder up`` and docker compose start one; run more for more validations at once.
"""

from __future__ import annotations

from workers.celery_app import make_celery

celery_app = make_celery(imports=("workers.datasets.tasks",))
app = celery_app  # `celery -A workers.validation_app` finds `app`
