-- cell_percentiles: per run, cell and metric, the distribution across slots.
-- One row per (run, cell, metric_source, workload_index, workload, job,
-- direction, metric) with slots = how many slots produced the metric and
-- p0, p50, p75, p90, p98, p100 over those slot values.
--
-- Exact, equal to numpy.percentile(values, p) (method "linear"): with the
-- n values sorted ascending, v[rn] the value of 1-based rank rn,
-- h = (n - 1) * p / 100 and
-- P = v[floor(h) + 1] + (h - floor(h)) * (v[ceil(h) + 1] - v[floor(h) + 1]).
-- p0 is the minimum and p100 the maximum. Which slots count: see slot_metrics
-- (fio rows with error <> 0 and failed app runs are left out).
--
-- Each group's values are sorted into one array (array_agg ... ORDER BY, a
-- hash aggregation over small groups: one value per slot) and the two
-- neighbours of each percentile are read from it by rank (element_at). A
-- window (row_number() over every slot value) would sort all the values by
-- the eight partition columns, which costs several times more.
WITH sorted AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric,
    max(unit) AS unit,
    count(*) AS n,
    array_agg(value ORDER BY value) AS vals
  FROM slot_metrics
  GROUP BY run_id, cell_id, metric_source, workload_index, workload, job, direction, metric
),
pcts AS (
  SELECT pk FROM (VALUES 0, 50, 75, 90, 98, 100) AS t (pk)
),
positioned AS (
  SELECT
    s.run_id, s.cell_id, s.metric_source, s.workload_index, s.workload, s.job, s.direction,
    s.metric, s.unit, s.n, s.vals, p.pk,
    CAST(s.n - 1 AS DOUBLE) * (CAST(p.pk AS DOUBLE) / CAST(100 AS DOUBLE)) AS h
  FROM sorted s
  CROSS JOIN pcts p
),
picked AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric, pk,
    unit,
    n,
    h - floor(h) AS frac,
    element_at(vals, CAST(floor(h) AS BIGINT) + 1) AS v_lo,
    element_at(vals, CAST(ceil(h) AS BIGINT) + 1) AS v_hi
  FROM positioned
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
