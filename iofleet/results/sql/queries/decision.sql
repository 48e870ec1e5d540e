-- decision: per run, workload and configuration (instance type x storage x fleet
-- size; its repeats pooled, every slot one sample), metric and statistic (`stat`: p0,
-- p50, p75, p90, p98, p100, mean; `value` is that statistic across the slots) the
-- figures of iofleet/results/decide.py's decision table, so the QuickSight dashboard
-- shows what `iofleet report` shows, whichever statistic a target names:
-- - slots, repeats, P0/P50/P75/P90/P98/P100 across the slots with numpy's linear
--   interpolation and the mean (the same on every stat's row);
-- - `rank`: the configuration's rank by `value` within its workload, metric and stat
--   (higher is better for iops and bw_bytes, lower for latency and wall time; ties by
--   the configuration fields, NULL last, fleet size as a number);
-- - `ranked`: the workload's default ranked metric (fio iops, else bw_bytes; ioping
--   lat_median_ns; app wall_seconds); `workload_metrics`: ',m1,m2,...,' every metric the
--   workload measured (a target on a metric it lacks leaves it on its default); both
--   are windows over the configurations (Trino stages: see `pareto`);
-- - cost from the plan (cell_costs), the same on every row of a configuration:
--   usd_per_run (the mean of its cells' estimates, NULL unless every cell has one),
--   usd_per_slot (/ fleet size), usd_per_instance_hour (/ fleet size x mean billable
--   slot seconds / 3600; 0 when the run cost $0 and seconds are unknown), usd_per_1k_iops
--   (/ the fleet's IOPS / 1000: per cell the sum of its slots' IOPS, mean over repeats),
--   usd_per_build (/ the successful builds per cell, mean over repeats), cost_complete;
-- - `pareto`: on the cost-performance front of its workload, metric and stat: no other
--   configuration has usd_per_slot <= and value at least as good, one of them strictly
--   (unknown cost: never on the front). One window, no self-join (Trino inlines every
--   reference to a WITH clause, and a self-join doubled the plan past its stage limit):
--   ordered by cost, then value best first, the best value among the rows of strictly
--   lower cost or of equal cost and strictly better value (the peer groups before the
--   row's own); dominated when that is at least as good as the row's value;
-- - `cost_order`: the order by usd_per_slot (unknown last), then rank: the dashboard's
--   "cheapest meeting the target" is the meeting row with the least cost_order.
-- `configuration` and `chart_label` (workload | configuration) name the rows for display.
-- The data sets of the QuickSight dashboard (its decision table with the target's
-- calculated fields, and the per-metric percentile charts on the p50 rows). A query, not
-- a view: callers filter it by run id. The p-th percentile: index (n - 1) x p/100,
-- lower neighbour a, upper b, fraction t; t >= 0.5 -> b - (b - a) x (1 - t), else
-- a + (b - a) x t (numpy's lerp).
WITH sv AS (
  SELECT
    m.run_id, m.cell_id, c.instance_type, c.storage_label, c.storage_type, c.storage_detail,
    c.fleet_size, m.metric_source, m.workload_index, m.workload, m.job, m.direction,
    m.metric, m.unit, m.value
  FROM slot_metrics m
  JOIN cells c ON c.run_id = m.run_id AND c.cell_id = m.cell_id
  WHERE m.value IS NOT NULL
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
    avg(value) AS mean,
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
    p100, mean
  FROM neighbours
),
cell_outcomes AS (
  SELECT
    run_id, metric_source, workload_index, workload, job, direction,
    instance_type, storage_label, storage_type, storage_detail, fleet_size, cell_id,
    sum(CASE WHEN metric = 'iops' THEN value END) AS fleet_iops,
    sum(CASE WHEN metric = 'wall_seconds' THEN 1 END) AS builds
  FROM sv
  GROUP BY
    run_id, metric_source, workload_index, workload, job, direction,
    instance_type, storage_label, storage_type, storage_detail, fleet_size, cell_id
),
cell_prices AS (
  SELECT
    k.*, cc.estimated_cost_usd, cc.slot_seconds, cc.cost_complete
  FROM cell_outcomes k
  LEFT JOIN cell_costs cc ON cc.run_id = k.run_id AND cc.cell_id = k.cell_id
),
costs AS (
  SELECT
    run_id, metric_source, workload_index, workload, job, direction,
    instance_type, storage_label, storage_type, storage_detail, fleet_size,
    CASE WHEN count(*) = count(estimated_cost_usd) THEN avg(estimated_cost_usd) END
      AS usd_per_run,
    CASE WHEN count(*) = count(estimated_cost_usd)
      THEN sum(CASE WHEN cost_complete = false THEN 1 ELSE 0 END) = 0 END AS cost_complete,
    CASE WHEN sum(CASE WHEN slot_seconds IS NULL OR slot_seconds = 0 THEN 1 ELSE 0 END) = 0
      THEN avg(slot_seconds) END AS slot_seconds,
    avg(fleet_iops) AS fleet_iops,
    avg(CAST(builds AS DOUBLE)) AS builds
  FROM cell_prices
  GROUP BY
    run_id, metric_source, workload_index, workload, job, direction,
    instance_type, storage_label, storage_type, storage_detail, fleet_size
),
priced AS (
  SELECT
    g.*,
    CASE
      WHEN g.metric_source = 'fio' AND max(CASE WHEN g.metric = 'iops' THEN 1 ELSE 0 END)
        OVER (PARTITION BY g.run_id, g.metric_source, g.workload_index, g.workload, g.job,
          g.direction) = 1 THEN 'iops'
      WHEN g.metric_source = 'fio' THEN 'bw_bytes'
      WHEN g.metric_source = 'ioping' THEN 'lat_median_ns'
      WHEN g.metric_source = 'app' THEN 'wall_seconds'
    END AS ranked_metric,
    concat(',', array_join(array_sort(array_distinct(array_agg(g.metric) OVER (
      PARTITION BY g.run_id, g.metric_source, g.workload_index, g.workload, g.job, g.direction
    ))), ','), ',') AS workload_metrics,
    c.usd_per_run,
    c.usd_per_run / CAST(nullif(g.fleet_size, 0) AS DOUBLE) AS usd_per_slot,
    CASE
      WHEN g.fleet_size > 0 AND c.slot_seconds IS NOT NULL
        THEN c.usd_per_run / (CAST(g.fleet_size AS DOUBLE) * c.slot_seconds / 3600.0E0)
      WHEN c.usd_per_run = 0.0E0 THEN 0.0E0
    END AS usd_per_instance_hour,
    CASE WHEN c.fleet_iops <> 0.0E0 THEN c.usd_per_run / (c.fleet_iops / 1000.0E0) END
      AS usd_per_1k_iops,
    CASE WHEN c.builds <> 0.0E0 THEN c.usd_per_run / c.builds END AS usd_per_build,
    CASE WHEN c.usd_per_run IS NOT NULL THEN c.cost_complete END AS cost_complete
  FROM configs g
  JOIN costs c
    ON c.run_id = g.run_id AND c.metric_source = g.metric_source
    AND coalesce(c.workload_index, -1) = coalesce(g.workload_index, -1)
    AND coalesce(c.workload, '') = coalesce(g.workload, '')
    AND coalesce(c.job, '') = coalesce(g.job, '') AND coalesce(c.direction, '') = coalesce(g.direction, '')
    AND coalesce(c.instance_type, '') = coalesce(g.instance_type, '')
    AND coalesce(c.storage_label, '') = coalesce(g.storage_label, '')
    AND coalesce(c.storage_type, '') = coalesce(g.storage_type, '')
    AND coalesce(c.storage_detail, '') = coalesce(g.storage_detail, '')
    AND coalesce(c.fleet_size, -1) = coalesce(g.fleet_size, -1)
),
stat_rows AS (
  SELECT
    p.*,
    s.stat,
    CASE s.stat
      WHEN 'p0' THEN p.p0 WHEN 'p50' THEN p.p50 WHEN 'p75' THEN p.p75
      WHEN 'p90' THEN p.p90 WHEN 'p98' THEN p.p98 WHEN 'p100' THEN p.p100
      WHEN 'mean' THEN p.mean
    END AS value
  FROM priced p
  CROSS JOIN (VALUES ('p0'), ('p50'), ('p75'), ('p90'), ('p98'), ('p100'), ('mean')) AS s (stat)
),
scored AS (
  SELECT
    r.*,
    CASE WHEN r.metric IN ('iops', 'bw_bytes') THEN r.value ELSE -r.value END AS goodness
  FROM stat_rows r
),
ranked_rows AS (
  SELECT
    r.*,
    row_number() OVER (
      PARTITION BY r.run_id, r.metric_source, r.workload_index, r.workload, r.job,
        r.direction, r.metric, r.stat
      ORDER BY
        -r.goodness,
        r.instance_type IS NULL, CAST(r.instance_type AS VARCHAR),
        r.storage_label IS NULL, CAST(r.storage_label AS VARCHAR),
        r.storage_type IS NULL, CAST(r.storage_type AS VARCHAR),
        r.storage_detail IS NULL, CAST(r.storage_detail AS VARCHAR),
        r.fleet_size IS NULL, r.fleet_size
    ) AS "rank",
    max(r.goodness) OVER (
      PARTITION BY r.run_id, r.metric_source, r.workload_index, r.workload, r.job,
        r.direction, r.metric, r.stat, r.usd_per_slot IS NULL
      ORDER BY r.usd_per_slot, r.goodness DESC
      GROUPS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS best_before
  FROM scored r
)
SELECT
  r.run_id, r.metric_source, r.workload_index, r.workload, r.job, r.direction,
  r.stat, r."rank",
  coalesce(r.metric = r.ranked_metric, false) AS ranked,
  r.workload_metrics,
  r.instance_type, r.storage_label, r.storage_type, r.storage_detail, r.fleet_size,
  concat(coalesce(r.storage_label, '?'), ' x', coalesce(CAST(r.fleet_size AS VARCHAR), '?'),
    ' ', coalesce(r.instance_type, '?')) AS configuration,
  concat('w', lpad(coalesce(CAST(r.workload_index AS VARCHAR), '?'), 2, '0'), ' ',
    coalesce(r.workload, '?'),
    CASE WHEN r.job IS NOT NULL AND r.job <> r.workload THEN concat(': ', r.job) ELSE '' END,
    CASE WHEN r.direction IS NOT NULL THEN concat(' (', r.direction, ')') ELSE '' END,
    ' | ', coalesce(r.storage_label, '?'), ' x', coalesce(CAST(r.fleet_size AS VARCHAR), '?'),
    ' ', coalesce(r.instance_type, '?')) AS chart_label,
  r.repeats, r.slots, r.metric, r.unit, r.value,
  r.p0, r.p50, r.p75, r.p90, r.p98, r.p100, r.mean,
  r.usd_per_run, r.usd_per_slot, r.usd_per_instance_hour, r.usd_per_1k_iops, r.usd_per_build,
  r.cost_complete,
  r.usd_per_slot IS NOT NULL AND coalesce(r.best_before < r.goodness, true) AS pareto,
  row_number() OVER (
    PARTITION BY r.run_id, r.metric_source, r.workload_index, r.workload, r.job,
      r.direction, r.metric, r.stat
    ORDER BY r.usd_per_slot IS NULL, r.usd_per_slot, r."rank"
  ) AS cost_order
FROM ranked_rows r
