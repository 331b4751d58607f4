"""The ``redistate`` command: inspect what a namespace holds (``python -m redistate.cli``)."""
