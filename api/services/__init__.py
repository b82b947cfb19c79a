"""Business logic between routes and core.repositories; commits happen here, at the edge."""
