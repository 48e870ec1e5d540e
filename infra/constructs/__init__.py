"""One construct per concern: storage, catalog, fleet, orchestration, ingest, dashboard."""
