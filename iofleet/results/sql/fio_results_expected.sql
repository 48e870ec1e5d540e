-- fio_results_expected: every fio_results row with the plan's expectation for
-- its (run, cell, workload, job, direction) from the expectations table, and
-- the ratio measured / expected. Raw fio output and fio_results stay exactly
-- as fio reported them; the expectation is joined here (docs/expectations.md).
--
-- expected_iops / expected_bw_bytes are the ceilings of the whole fio job
-- (all its numjobs threads): compare them with one row per job and direction,
-- i.e. jobs run with group_reporting (every multi-thread job in fio-jobs/).
-- Ratios are NULL when the expectation is unknown or zero. limited_by is NULL
-- when the run has no expectation for the row (e.g. a run.json without one).
SELECT
  f.run_id,
  f.cell_id,
  f.slot_index,
  f.workload_index,
  f.workload,
  f.job,
  f.job_index,
  f.direction,
  f.iops,
  f.bw_bytes,
  f.io_bytes,
  f.runtime_ms,
  f."error",
  f.clat_p50_ns,
  f.clat_p99_ns,
  e.expected_iops,
  e.expected_bw_bytes,
  e.limited_by,
  e.upper_bound,
  e.seconds_to_exhaust,
  e.burst_policy,
  CASE
    WHEN e.expected_iops > 0 THEN CAST(f.iops AS DOUBLE) / CAST(e.expected_iops AS DOUBLE)
  END AS iops_ratio,
  CASE
    WHEN e.expected_bw_bytes > 0
      THEN CAST(f.bw_bytes AS DOUBLE) / CAST(e.expected_bw_bytes AS DOUBLE)
  END AS bw_ratio
FROM fio_results f
LEFT JOIN expectations e
  ON e.run_id = f.run_id
  AND e.cell_id = f.cell_id
  AND e.workload_index = f.workload_index
  AND e.job = f.job
  AND e.direction = f.direction
