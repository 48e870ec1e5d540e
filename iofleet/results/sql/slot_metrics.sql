-- slot_metrics: long format, one row per (slot, workload, job, direction, metric)
-- with one DOUBLE value. The input of the decision and slot_values queries and
-- of expected_vs_measured; cell_percentiles reads the same values (its fio part
-- straight from fio_slot_metrics, wide).
--
-- fio (metric_source 'fio'): fio_slot_metrics (fio_results rows with error <> 0
--   left out; a job's several entries in one slot summed / maxed, see there),
--   one row per metric.
-- ioping ('ioping'): per slot and operation, over its timed requests:
--   lat_min_ns, lat_median_ns (exact, linear interpolation), lat_mean_ns,
--   lat_max_ns. workload is 'ioping', job is NULL, direction the operation.
-- app ('app'): wall_seconds of the 'run' phase with exit_code 0 (a failed
--   build is not a build time). workload is the app name, job/direction NULL.
--
-- Each table is read once: the wide per-slot rows are unpivoted by a CROSS
-- JOIN UNNEST of the metric names (a CASE picks the column), not by one UNION
-- branch per metric (Trino inlines a WITH query at every reference, so each
-- branch would scan the table again; an UNNEST stays in the scan's stage
-- where a CROSS JOIN with VALUES adds a join and a stage).
WITH ioping_ranked AS (
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
  SELECT
    f.run_id, f.cell_id, f.slot_index, 'fio' AS metric_source, f.workload_index, f.workload,
    f.job, f.direction, m.metric,
    CASE m.metric WHEN 'iops' THEN 'iops' WHEN 'bw_bytes' THEN 'B/s' ELSE 'ns' END AS unit,
    CASE m.metric
      WHEN 'iops' THEN f.iops
      WHEN 'bw_bytes' THEN f.bw_bytes
      WHEN 'clat_mean_ns' THEN f.clat_mean_ns
      WHEN 'clat_p50_ns' THEN f.clat_p50_ns
      WHEN 'clat_p90_ns' THEN f.clat_p90_ns
      WHEN 'clat_p99_ns' THEN f.clat_p99_ns
      WHEN 'clat_p99_9_ns' THEN f.clat_p99_9_ns
      WHEN 'clat_max_ns' THEN f.clat_max_ns
    END AS value
  FROM fio_slot_metrics f
  CROSS JOIN UNNEST(
    ARRAY[
      'iops', 'bw_bytes', 'clat_mean_ns', 'clat_p50_ns', 'clat_p90_ns', 'clat_p99_ns',
      'clat_p99_9_ns', 'clat_max_ns'
    ]
  ) AS m (metric)
  UNION ALL
  SELECT
    i.run_id, i.cell_id, i.slot_index, 'ioping', i.workload_index, 'ioping',
    CAST(NULL AS VARCHAR), i.operation, m.metric, 'ns',
    CASE m.metric
      WHEN 'lat_min_ns' THEN i.lat_min_ns
      WHEN 'lat_median_ns' THEN i.v_lo + i.frac * (i.v_hi - i.v_lo)
      WHEN 'lat_mean_ns' THEN i.lat_mean_ns
      WHEN 'lat_max_ns' THEN i.lat_max_ns
    END
  FROM ioping i
  CROSS JOIN UNNEST(
    ARRAY['lat_min_ns', 'lat_median_ns', 'lat_mean_ns', 'lat_max_ns']
  ) AS m (metric)
  UNION ALL
  SELECT run_id, cell_id, slot_index, 'app', workload_index, app, CAST(NULL AS VARCHAR),
         CAST(NULL AS VARCHAR), 'wall_seconds', 's', CAST(wall_seconds AS DOUBLE) FROM app
)
SELECT
  run_id, cell_id, slot_index, metric_source, workload_index, workload, job, direction,
  metric, unit, value
FROM unioned
WHERE value IS NOT NULL AND NOT is_nan(value)
