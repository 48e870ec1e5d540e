-- expected_vs_measured: per run, cell, fio workload, job and direction, what
-- the plan expected (expectations, from run.json) next to what the slots
-- measured (one value per slot, as in slot_metrics: fio rows with an error
-- are left out, a job's threads summed).
--
-- Measured: slots, the mean over slots, and p0 / p50 / p100 over slots (exact,
-- from cell_percentiles) of IOPS and throughput (bytes/s).
-- Ratios: iops_ratio = iops_p50 / expected_iops (the typical slot against the
-- ceiling), iops_min_ratio = iops_p0 / expected_iops (the worst slot); the same
-- for bw_*. NULL when the expectation is unknown (limited_by 'unknown', local
-- storage) or zero. Rows exist for measurements without an expectation and
-- for expectations without a measurement (a cell whose slots all failed).
WITH pcts AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction,
    max(CASE WHEN metric = 'iops' THEN slots END) AS slots,
    max(CASE WHEN metric = 'iops' THEN p0 END) AS iops_p0,
    max(CASE WHEN metric = 'iops' THEN p50 END) AS iops_p50,
    max(CASE WHEN metric = 'iops' THEN p100 END) AS iops_p100,
    max(CASE WHEN metric = 'bw_bytes' THEN p0 END) AS bw_p0,
    max(CASE WHEN metric = 'bw_bytes' THEN p50 END) AS bw_p50,
    max(CASE WHEN metric = 'bw_bytes' THEN p100 END) AS bw_p100
  FROM cell_percentiles
  WHERE metric_source = 'fio' AND metric IN ('iops', 'bw_bytes')
  GROUP BY run_id, cell_id, workload_index, workload, job, direction
),
means AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction,
    avg(CASE WHEN metric = 'iops' THEN value END) AS iops_mean,
    avg(CASE WHEN metric = 'bw_bytes' THEN value END) AS bw_mean
  FROM slot_metrics
  WHERE metric_source = 'fio' AND metric IN ('iops', 'bw_bytes')
  GROUP BY run_id, cell_id, workload_index, workload, job, direction
),
measured AS (
  SELECT
    p.run_id, p.cell_id, p.workload_index, p.workload, p.job, p.direction, p.slots,
    m.iops_mean, p.iops_p0, p.iops_p50, p.iops_p100,
    m.bw_mean, p.bw_p0, p.bw_p50, p.bw_p100
  FROM pcts p
  LEFT JOIN means m
    ON m.run_id = p.run_id
    AND m.cell_id = p.cell_id
    AND m.workload_index = p.workload_index
    AND m.workload = p.workload
    AND m.job = p.job
    AND m.direction = p.direction
),
joined AS (
  SELECT
    coalesce(m.run_id, e.run_id) AS run_id,
    coalesce(m.cell_id, e.cell_id) AS cell_id,
    coalesce(m.workload_index, e.workload_index) AS workload_index,
    coalesce(m.workload, e.workload) AS workload,
    coalesce(m.job, e.job) AS job,
    coalesce(m.direction, e.direction) AS direction,
    coalesce(m.slots, 0) AS slots,
    m.iops_mean, m.iops_p0, m.iops_p50, m.iops_p100,
    m.bw_mean, m.bw_p0, m.bw_p50, m.bw_p100,
    e.expected_iops,
    e.expected_bw_bytes,
    e.limited_by,
    e.upper_bound,
    e.seconds_to_exhaust,
    e.burst_source,
    e.runtime_s AS expected_runtime_s,
    e.burst_policy
  FROM measured m
  FULL OUTER JOIN expectations e
    ON e.run_id = m.run_id
    AND e.cell_id = m.cell_id
    AND e.workload_index = m.workload_index
    AND e.workload = m.workload
    AND e.job = m.job
    AND e.direction = m.direction
)
SELECT
  j.run_id,
  j.cell_id,
  c.cell_index,
  c.instance_type,
  c.storage_label,
  c.storage_type,
  c.storage_detail,
  c.fleet_size,
  c."repeat",
  j.workload_index,
  j.workload,
  j.job,
  j.direction,
  j.slots,
  j.expected_iops,
  j.iops_mean,
  j.iops_p0,
  j.iops_p50,
  j.iops_p100,
  CASE
    WHEN j.expected_iops > 0 THEN CAST(j.iops_p50 AS DOUBLE) / CAST(j.expected_iops AS DOUBLE)
  END AS iops_ratio,
  CASE
    WHEN j.expected_iops > 0 THEN CAST(j.iops_p0 AS DOUBLE) / CAST(j.expected_iops AS DOUBLE)
  END AS iops_min_ratio,
  j.expected_bw_bytes,
  j.bw_mean,
  j.bw_p0,
  j.bw_p50,
  j.bw_p100,
  CASE
    WHEN j.expected_bw_bytes > 0
      THEN CAST(j.bw_p50 AS DOUBLE) / CAST(j.expected_bw_bytes AS DOUBLE)
  END AS bw_ratio,
  CASE
    WHEN j.expected_bw_bytes > 0
      THEN CAST(j.bw_p0 AS DOUBLE) / CAST(j.expected_bw_bytes AS DOUBLE)
  END AS bw_min_ratio,
  j.limited_by,
  j.upper_bound,
  j.seconds_to_exhaust,
  j.burst_source,
  j.expected_runtime_s,
  j.burst_policy
FROM joined j
LEFT JOIN cells c ON c.run_id = j.run_id AND c.cell_id = j.cell_id
