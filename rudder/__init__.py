"""Rudder's Python client and the ``rudder`` command line."""

from importlib import metadata

from rudder.client import Client, RudderError

try:
    __version__ = metadata.version("rudder")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.1.0"

__all__ = ["Client", "RudderError", "__version__"]
