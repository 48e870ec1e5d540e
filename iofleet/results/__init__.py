"""Results beyond the views: per-slot statistics, `iofleet compare`, `iofleet import`.

numpy/scipy are imported by the modules that need them (stats, compare), never
by this package's __init__: the agent and the Lambdas must not pull them in.
"""
