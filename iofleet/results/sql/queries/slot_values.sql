-- slot_values: one row per (slot, workload, job, direction, metric) with the
-- slot's cell fields beside the value: the samples of `iofleet compare` and of
-- the repeat-noise check of `iofleet report` (a slot, never a single I/O, is
-- one sample). Reads the views slot_metrics and cells; a query, not a view:
-- callers filter it by run id (`SELECT * FROM (this) WHERE run_id IN (...)`).
SELECT
  m.run_id,
  m.cell_id,
  c.cell_index,
  c.instance_type,
  c.storage_label,
  c.storage_type,
  c.storage_detail,
  c.fleet_size,
  c."repeat",
  m.slot_index,
  m.metric_source,
  m.workload_index,
  m.workload,
  m.job,
  m.direction,
  m.metric,
  m.unit,
  m.value,
  s.fio_jobs
FROM slot_metrics m
JOIN cells c ON c.run_id = m.run_id AND c.cell_id = m.cell_id
LEFT JOIN slots s
  ON s.run_id = m.run_id AND s.cell_id = m.cell_id AND s.slot_index = m.slot_index
