"""Reports from the warehouse views: terminal table, CSV/JSON, offline HTML.

`model` groups the rows of `cell_percentiles` and `fleet_latency` for display,
`units` formats raw numbers for people, `text`, `machine` and `html` render,
and `cli.report_command` is `iofleet report`. Everything except `cli` is
stdlib only and works on plain dicts (the rows the views return).
"""
