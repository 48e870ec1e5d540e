"""iofleet: storage benchmarks at fleet scale."""

__version__ = "0.1.0"
