"""Runnable examples: ``python -m engine.examples.digits``."""
