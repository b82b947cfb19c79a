"""Rudder's Celery workers: train one job per task with the engine, steered over Redis."""
