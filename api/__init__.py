"""The Rudder HTTP API (FastAPI). Imports core, never the engine."""
