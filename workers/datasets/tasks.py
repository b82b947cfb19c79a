"""The validation task, registered on whichever worker app imports it (the validator's,
workers.validation_app, and the training workers', workers.celery_app)."""

from __future__ import annotations

from celery import shared_task

from core.queue import VALIDATE_DATASET_TASK
from workers import resources
from workers.datasets.validate import validate_dataset as validate_dataset_files


@shared_task(name=VALIDATE_DATASET_TASK)
def validate_dataset(dataset_id: str) -> str:
    """Check a completed upload and mark it ready (with its stats) or invalid."""
    return validate_dataset_files(str(dataset_id), resources.get_store())
