"""Build: local bases, BuildKit builds on the engine, daemonless CI builders, and the size report."""
