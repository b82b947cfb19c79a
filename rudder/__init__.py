"""Rudder's Python client and the ``rudder`` command line."""

from rudder.client import Client, RudderError

__all__ = ["Client", "RudderError"]
