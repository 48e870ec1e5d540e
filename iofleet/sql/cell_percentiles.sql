-- cell_percentiles: per run, cell and metric, the distribution across slots.
-- One row per (run, cell, metric_source, workload_index, workload, job,
-- direction, metric) with slots = how many slots produced the metric and
-- p0, p50, p75, p90, p98, p100 over those slot values.
--
-- Exact, equal to numpy.percentile(values, p) (method "linear"): with the
-- n values sorted ascending and 1-based rank rn, h = (n - 1) * p / 100 and
-- P = v[floor(h) + 1] + (h - floor(h)) * (v[ceil(h) + 1] - v[floor(h) + 1]).
-- p0 is the minimum and p100 the maximum. Which slots count: see slot_metrics
-- (fio rows with error <> 0 and failed app runs are left out).
WITH ranked AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric, unit,
    value,
    row_number() OVER (
      PARTITION BY run_id, cell_id, metric_source, workload_index, workload, job, direction, metric
      ORDER BY value
    ) AS rn,
    count(*) OVER (
      PARTITION BY run_id, cell_id, metric_source, workload_index, workload, job, direction, metric
    ) AS n
  FROM slot_metrics
),
pcts AS (
  SELECT pk FROM (VALUES 0, 50, 75, 90, 98, 100) AS t (pk)
),
positioned AS (
  SELECT
    r.run_id, r.cell_id, r.metric_source, r.workload_index, r.workload, r.job, r.direction,
    r.metric, r.unit, r.value, r.rn, r.n, p.pk,
    CAST(r.n - 1 AS DOUBLE) * (CAST(p.pk AS DOUBLE) / CAST(100 AS DOUBLE)) AS h
  FROM ranked r
  CROSS JOIN pcts p
),
picked AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric, pk,
    max(unit) AS unit,
    max(n) AS n,
    max(h - floor(h)) AS frac,
    max(CASE WHEN rn = CAST(floor(h) AS BIGINT) + 1 THEN value END) AS v_lo,
    max(CASE WHEN rn = CAST(ceil(h) AS BIGINT) + 1 THEN value END) AS v_hi
  FROM positioned
  GROUP BY run_id, cell_id, metric_source, workload_index, workload, job, direction, metric, pk
),
pivoted AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric,
    max(unit) AS unit,
    max(n) AS slots,
    max(CASE WHEN pk = 0 THEN v_lo + frac * (v_hi - v_lo) END) AS p0,
    max(CASE WHEN pk = 50 THEN v_lo + frac * (v_hi - v_lo) END) AS p50,
    max(CASE WHEN pk = 75 THEN v_lo + frac * (v_hi - v_lo) END) AS p75,
    max(CASE WHEN pk = 90 THEN v_lo + frac * (v_hi - v_lo) END) AS p90,
    max(CASE WHEN pk = 98 THEN v_lo + frac * (v_hi - v_lo) END) AS p98,
    max(CASE WHEN pk = 100 THEN v_lo + frac * (v_hi - v_lo) END) AS p100
  FROM picked
  GROUP BY run_id, cell_id, metric_source, workload_index, workload, job, direction, metric
)
SELECT
  v.run_id,
  v.cell_id,
  c.cell_index,
  c.instance_type,
  c.storage_label,
  c.storage_type,
  c.storage_detail,
  c.fleet_size,
  c."repeat",
  v.metric_source,
  v.workload_index,
  v.workload,
  v.job,
  v.direction,
  v.metric,
  v.unit,
  v.slots,
  v.p0,
  v.p50,
  v.p75,
  v.p90,
  v.p98,
  v.p100
FROM pivoted v
LEFT JOIN cells c ON c.run_id = v.run_id AND c.cell_id = v.cell_id
