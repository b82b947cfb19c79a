"""Validation of uploaded data sets, run by the worker (``rudder.validate_dataset``).

Each format module checks one kind of upload with strict limits and returns a
:class:`~workers.datasets.summary.Summary`; anything wrong raises
:class:`~workers.datasets.summary.InvalidDataset` with a reason the user sees.
"""
