-- decision: per run, workload and configuration (instance type x storage x fleet
-- size; its repeats pooled, every slot one sample) and metric: slots, repeats,
-- P0/P50/P75/P90/P98/P100 across the slots with numpy's linear interpolation (the
-- percentiles iofleet/results/decide.py computes), the rank of the configuration by
-- P50 within its workload and metric (higher is better for iops and bw_bytes, lower
-- for latency and wall time; ties by the configuration fields as text, NULL last),
-- `ranked` on the workload's default ranked metric (fio iops, else bw_bytes; ioping
-- lat_median_ns; app wall_seconds), and the plan's cost: the mean of its cells'
-- estimates per run (NULL unless every cell has one) and per slot.
-- `configuration` and `chart_label` (workload | configuration) name the rows for display.
-- The data set of the QuickSight dashboard (its decision table and per-metric
-- percentile charts); `iofleet report`'s decision table ranks the same rows and adds
-- targets, $ per outcome and the Pareto front. A query, not a view: callers filter it
-- by run id. The p-th percentile: index (n - 1) x p/100, lower neighbour a, upper b,
-- fraction t; t >= 0.5 -> b - (b - a) x (1 - t), else a + (b - a) x t (numpy's lerp).
WITH sv AS (
  SELECT
    m.run_id, m.cell_id, c.instance_type, c.storage_label, c.storage_type, c.storage_detail,
    c.fleet_size, m.metric_source, m.workload_index, m.workload, m.job, m.direction,
    m.metric, m.unit, m.value
  FROM slot_metrics m
  JOIN cells c ON c.run_id = m.run_id AND c.cell_id = m.cell_id
  WHERE m.value IS NOT NULL
),
workloads AS (
  SELECT
    run_id, metric_source, workload_index, workload, job, direction,
    CASE
      WHEN metric_source = 'fio' AND sum(CASE WHEN metric = 'iops' THEN 1 ELSE 0 END) > 0
        THEN 'iops'
      WHEN metric_source = 'fio' AND sum(CASE WHEN metric = 'bw_bytes' THEN 1 ELSE 0 END) > 0
        THEN 'bw_bytes'
      WHEN metric_source = 'ioping'
        AND sum(CASE WHEN metric = 'lat_median_ns' THEN 1 ELSE 0 END) > 0 THEN 'lat_median_ns'
      WHEN metric_source = 'app'
        AND sum(CASE WHEN metric = 'wall_seconds' THEN 1 ELSE 0 END) > 0 THEN 'wall_seconds'
    END AS ranked_metric
  FROM sv
  GROUP BY run_id, metric_source, workload_index, workload, job, direction
),
ordered AS (
  SELECT
    sv.*,
    row_number() OVER (
      PARTITION BY run_id, metric_source, workload_index, workload, job, direction, metric,
        instance_type, storage_label, storage_type, storage_detail, fleet_size
      ORDER BY value
    ) - 1 AS i,
    count(*) OVER (
      PARTITION BY run_id, metric_source, workload_index, workload, job, direction, metric,
        instance_type, storage_label, storage_type, storage_detail, fleet_size
    ) AS n
  FROM sv
),
indexed AS (
  SELECT
    ordered.*,
    CAST(n - 1 AS DOUBLE) * 0.5E0 AS x50,
    CAST(n - 1 AS DOUBLE) * 0.75E0 AS x75,
    CAST(n - 1 AS DOUBLE) * 0.9E0 AS x90,
    CAST(n - 1 AS DOUBLE) * 0.98E0 AS x98
  FROM ordered
),
neighbours AS (
  SELECT
    run_id, metric_source, workload_index, workload, job, direction, metric,
    instance_type, storage_label, storage_type, storage_detail, fleet_size,
    max(unit) AS unit,
    count(*) AS slots,
    count(DISTINCT cell_id) AS repeats,
    min(value) AS p0,
    max(value) AS p100,
    max(CASE WHEN i = floor(x50) THEN value END) AS a50,
    max(CASE WHEN i = least(floor(x50) + 1, n - 1) THEN value END) AS b50,
    max(x50 - floor(x50)) AS t50,
    max(CASE WHEN i = floor(x75) THEN value END) AS a75,
    max(CASE WHEN i = least(floor(x75) + 1, n - 1) THEN value END) AS b75,
    max(x75 - floor(x75)) AS t75,
    max(CASE WHEN i = floor(x90) THEN value END) AS a90,
    max(CASE WHEN i = least(floor(x90) + 1, n - 1) THEN value END) AS b90,
    max(x90 - floor(x90)) AS t90,
    max(CASE WHEN i = floor(x98) THEN value END) AS a98,
    max(CASE WHEN i = least(floor(x98) + 1, n - 1) THEN value END) AS b98,
    max(x98 - floor(x98)) AS t98
  FROM indexed
  GROUP BY
    run_id, metric_source, workload_index, workload, job, direction, metric,
    instance_type, storage_label, storage_type, storage_detail, fleet_size
),
configs AS (
  SELECT
    run_id, metric_source, workload_index, workload, job, direction, metric, unit,
    instance_type, storage_label, storage_type, storage_detail, fleet_size, slots, repeats,
    p0,
    CASE WHEN t50 >= 0.5E0 THEN b50 - (b50 - a50) * (1.0E0 - t50)
      ELSE a50 + (b50 - a50) * t50 END AS p50,
    CASE WHEN t75 >= 0.5E0 THEN b75 - (b75 - a75) * (1.0E0 - t75)
      ELSE a75 + (b75 - a75) * t75 END AS p75,
    CASE WHEN t90 >= 0.5E0 THEN b90 - (b90 - a90) * (1.0E0 - t90)
      ELSE a90 + (b90 - a90) * t90 END AS p90,
    CASE WHEN t98 >= 0.5E0 THEN b98 - (b98 - a98) * (1.0E0 - t98)
      ELSE a98 + (b98 - a98) * t98 END AS p98,
    p100
  FROM neighbours
),
config_cells AS (
  SELECT DISTINCT
    run_id, metric_source, workload_index, workload, job, direction, metric,
    instance_type, storage_label, storage_type, storage_detail, fleet_size, cell_id
  FROM sv
),
costs AS (
  SELECT
    k.run_id, k.metric_source, k.workload_index, k.workload, k.job, k.direction, k.metric,
    k.instance_type, k.storage_label, k.storage_type, k.storage_detail, k.fleet_size,
    CASE WHEN count(*) = count(cc.estimated_cost_usd) THEN avg(cc.estimated_cost_usd) END
      AS usd_per_run
  FROM config_cells k
  LEFT JOIN cell_costs cc ON cc.run_id = k.run_id AND cc.cell_id = k.cell_id
  GROUP BY
    k.run_id, k.metric_source, k.workload_index, k.workload, k.job, k.direction, k.metric,
    k.instance_type, k.storage_label, k.storage_type, k.storage_detail, k.fleet_size
)
SELECT
  g.run_id, g.metric_source, g.workload_index, g.workload, g.job, g.direction,
  row_number() OVER (
    PARTITION BY g.run_id, g.metric_source, g.workload_index, g.workload, g.job, g.direction,
      g.metric
    ORDER BY
      CASE WHEN g.metric IN ('iops', 'bw_bytes') THEN -g.p50 ELSE g.p50 END,
      g.instance_type IS NULL, CAST(g.instance_type AS VARCHAR),
      g.storage_label IS NULL, CAST(g.storage_label AS VARCHAR),
      g.storage_type IS NULL, CAST(g.storage_type AS VARCHAR),
      g.storage_detail IS NULL, CAST(g.storage_detail AS VARCHAR),
      g.fleet_size IS NULL, CAST(g.fleet_size AS VARCHAR)
  ) AS "rank",
  coalesce(g.metric = w.ranked_metric, false) AS ranked,
  g.instance_type, g.storage_label, g.storage_type, g.storage_detail, g.fleet_size,
  concat(coalesce(g.storage_label, '?'), ' x', coalesce(CAST(g.fleet_size AS VARCHAR), '?'),
    ' ', coalesce(g.instance_type, '?')) AS configuration,
  concat('w', lpad(coalesce(CAST(g.workload_index AS VARCHAR), '?'), 2, '0'), ' ',
    coalesce(g.workload, '?'),
    CASE WHEN g.job IS NOT NULL AND g.job <> g.workload THEN concat(': ', g.job) ELSE '' END,
    CASE WHEN g.direction IS NOT NULL THEN concat(' (', g.direction, ')') ELSE '' END,
    ' | ', coalesce(g.storage_label, '?'), ' x', coalesce(CAST(g.fleet_size AS VARCHAR), '?'),
    ' ', coalesce(g.instance_type, '?')) AS chart_label,
  g.repeats, g.slots, g.metric, g.unit,
  g.p0, g.p50, g.p75, g.p90, g.p98, g.p100,
  c.usd_per_run,
  c.usd_per_run / CAST(g.fleet_size AS DOUBLE) AS usd_per_slot
FROM configs g
JOIN workloads w
  ON w.run_id = g.run_id AND w.metric_source = g.metric_source
  AND coalesce(w.workload_index, -1) = coalesce(g.workload_index, -1)
  AND coalesce(w.workload, '') = coalesce(g.workload, '')
  AND coalesce(w.job, '') = coalesce(g.job, '') AND coalesce(w.direction, '') = coalesce(g.direction, '')
JOIN costs c
  ON c.run_id = g.run_id AND c.metric_source = g.metric_source AND c.metric = g.metric
  AND coalesce(c.workload_index, -1) = coalesce(g.workload_index, -1)
  AND coalesce(c.workload, '') = coalesce(g.workload, '')
  AND coalesce(c.job, '') = coalesce(g.job, '') AND coalesce(c.direction, '') = coalesce(g.direction, '')
  AND coalesce(c.instance_type, '') = coalesce(g.instance_type, '')
  AND coalesce(c.storage_label, '') = coalesce(g.storage_label, '')
  AND coalesce(c.storage_type, '') = coalesce(g.storage_type, '')
  AND coalesce(c.storage_detail, '') = coalesce(g.storage_detail, '')
  AND coalesce(c.fleet_size, -1) = coalesce(g.fleet_size, -1)
