"""Thin Lambda handlers: Powertools decorators + one call into `iofleet.aws` logic.

Each folder is staged on its own (handler.py at the asset root, plus the
`iofleet/` package); boto3 clients come from per-module
`functools.cache` helpers and honour AWS_ENDPOINT_URL, which is how tests point them at
moto server.
"""
