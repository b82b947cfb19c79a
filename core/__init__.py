"""Shared service infrastructure for the api and the workers.

Nothing here imports another Rudder package (design.md import rules); the engine is
only ever touched by the worker side.
"""
