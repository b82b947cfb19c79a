"""The api's inspector: a child process of the api that has the engine loaded and answers
the questions that need it (core.inspection), under memory and CPU limits, so the api
process itself never imports the engine nor spends its memory on a user's model.

Run as ``python -m workers.inspector --memory-bytes N`` (api/services/inspector.py starts
and restarts it). Every answer comes from shape inference alone (engine.symbol.shapes):
no operator runs on data.
"""
