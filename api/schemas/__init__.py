"""Request and response bodies, named ``<Resource>Create`` / ``<Resource>Public``."""
