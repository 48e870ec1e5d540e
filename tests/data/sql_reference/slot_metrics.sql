-- slot_metrics: long format, one row per (slot, workload, job, direction, metric)
-- with one DOUBLE value. The input of cell_percentiles.
--
-- fio (metric_source 'fio'): from fio_results, rows with error <> 0 left out.
--   When one fio job name appears several times in a slot's output (numjobs
--   without group_reporting), the slot's iops and bw_bytes are the sums over
--   those entries and the latency metrics the maximum (the slowest thread).
--   For latency merged exactly across threads and slots see fleet_latency.
-- ioping ('ioping'): per slot and operation, over its timed requests:
--   lat_min_ns, lat_median_ns (exact, linear interpolation), lat_mean_ns,
--   lat_max_ns. workload is 'ioping', job is NULL, direction the operation.
-- app ('app'): wall_seconds of the 'run' phase with exit_code 0 (a failed
--   build is not a build time). workload is the app name, job/direction NULL.
WITH fio AS (
  SELECT
    run_id, cell_id, slot_index, workload_index, workload, job, direction,
    sum(CAST(iops AS DOUBLE)) AS iops,
    sum(CAST(bw_bytes AS DOUBLE)) AS bw_bytes,
    max(CAST(clat_mean_ns AS DOUBLE)) AS clat_mean_ns,
    max(CAST(clat_p50_ns AS DOUBLE)) AS clat_p50_ns,
    max(CAST(clat_p90_ns AS DOUBLE)) AS clat_p90_ns,
    max(CAST(clat_p99_ns AS DOUBLE)) AS clat_p99_ns,
    max(CAST(clat_p99_9_ns AS DOUBLE)) AS clat_p99_9_ns,
    max(CAST(clat_max_ns AS DOUBLE)) AS clat_max_ns
  FROM fio_results
  WHERE coalesce("error", 0) = 0
  GROUP BY run_id, cell_id, slot_index, workload_index, workload, job, direction
),
ioping_ranked AS (
  SELECT
    run_id, cell_id, slot_index, workload_index, operation,
    CAST(time_ns AS DOUBLE) AS v,
    row_number() OVER (
      PARTITION BY run_id, cell_id, slot_index, workload_index, operation
      ORDER BY time_ns
    ) AS rn,
    count(*) OVER (
      PARTITION BY run_id, cell_id, slot_index, workload_index, operation
    ) AS n
  FROM ioping_requests
  WHERE time_ns IS NOT NULL
),
ioping_mid AS (
  SELECT
    run_id, cell_id, slot_index, workload_index, operation, v, rn,
    CAST(n - 1 AS DOUBLE) * CAST(0.5 AS DOUBLE) AS h
  FROM ioping_ranked
),
ioping AS (
  SELECT
    run_id, cell_id, slot_index, workload_index, operation,
    min(v) AS lat_min_ns,
    max(v) AS lat_max_ns,
    avg(v) AS lat_mean_ns,
    max(h - floor(h)) AS frac,
    max(CASE WHEN rn = CAST(floor(h) AS BIGINT) + 1 THEN v END) AS v_lo,
    max(CASE WHEN rn = CAST(ceil(h) AS BIGINT) + 1 THEN v END) AS v_hi
  FROM ioping_mid
  GROUP BY run_id, cell_id, slot_index, workload_index, operation
),
app AS (
  SELECT run_id, cell_id, slot_index, workload_index, app, wall_seconds
  FROM app_runs
  WHERE phase = 'run' AND exit_code = 0 AND wall_seconds IS NOT NULL
),
unioned AS (
  SELECT run_id, cell_id, slot_index, 'fio' AS metric_source, workload_index, workload, job,
         direction, 'iops' AS metric, 'iops' AS unit, iops AS value FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'bw_bytes', 'B/s', bw_bytes FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'clat_mean_ns', 'ns', clat_mean_ns FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'clat_p50_ns', 'ns', clat_p50_ns FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'clat_p90_ns', 'ns', clat_p90_ns FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'clat_p99_ns', 'ns', clat_p99_ns FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'clat_p99_9_ns', 'ns', clat_p99_9_ns FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'fio', workload_index, workload, job,
         direction, 'clat_max_ns', 'ns', clat_max_ns FROM fio
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'ioping', workload_index, 'ioping', CAST(NULL AS VARCHAR),
         operation, 'lat_min_ns', 'ns', lat_min_ns FROM ioping
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'ioping', workload_index, 'ioping', CAST(NULL AS VARCHAR),
         operation, 'lat_median_ns', 'ns', v_lo + frac * (v_hi - v_lo) FROM ioping
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'ioping', workload_index, 'ioping', CAST(NULL AS VARCHAR),
         operation, 'lat_mean_ns', 'ns', lat_mean_ns FROM ioping
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'ioping', workload_index, 'ioping', CAST(NULL AS VARCHAR),
         operation, 'lat_max_ns', 'ns', lat_max_ns FROM ioping
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'app', workload_index, app, CAST(NULL AS VARCHAR),
         CAST(NULL AS VARCHAR), 'wall_seconds', 's', CAST(wall_seconds AS DOUBLE) FROM app
)
SELECT
  run_id, cell_id, slot_index, metric_source, workload_index, workload, job, direction,
  metric, unit, value
FROM unioned
WHERE value IS NOT NULL AND NOT is_nan(value)
