-- fio_latency_bins: the fio json+ completion-latency histograms, one row per bin
-- (the shape of the table of that name before decision 46). A histogram is stored
-- once per fio record, in fio_latency_histograms, its bins as two arrays of the
-- same length (bins_ns ascending, counts at the same positions); UNNEST of both
-- gives them back position by position. (DuckDB runs this as its select-list
-- unnest: iofleet/results/duckdb_sql.py.)
SELECT
  h.run_id,
  h.cell_id,
  h.slot_index,
  h.workload_index,
  h.workload,
  h.job,
  h.job_index,
  h.direction,
  u.bin_ns,
  u."count"
FROM fio_latency_histograms h
CROSS JOIN UNNEST(h.bins_ns, h.counts) AS u (bin_ns, "count")
