"""slotwise's built-in metrics. They register through the ``slotwise.metrics`` entry-point
group in ``pyproject.toml``, exactly as a third-party distribution registers its own."""
