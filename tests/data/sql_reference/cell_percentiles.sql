-- cell_percentiles: per run, cell and metric, the distribution across slots.
-- One row per (run, cell, metric_source, workload_index, workload, job,
-- direction, metric) with slots = how many slots produced the metric and
-- p0, p50, p75, p90, p98, p100 over those slot values.
--
-- Exact, equal to numpy.percentile(values, p) (method "linear"): with the
-- n values sorted ascending, v[rn] the value of 1-based rank rn,
-- h = (n - 1) * p / 100, g = h - floor(h), lo = v[floor(h) + 1], hi = v[ceil(h) + 1]:
-- P = lo + (hi - lo) * g, or hi - (hi - lo) * (1 - g) when g >= 0.5 (numpy's two-sided
-- lerp: the one-sided form alone was up to one unit in the last place off numpy's).
-- p0 is the minimum and p100 the maximum. Which slots count: see slot_metrics
-- (fio rows with error <> 0 and failed app runs are left out).
--
-- Each group's values are sorted into one array (array_agg ... ORDER BY, a
-- hash aggregation over small groups: one value per slot) and the two
-- neighbours of each percentile are read from it by rank (element_at), all
-- six percentiles in the same row. A window (row_number() over every slot
-- value) would sort all the values by the eight partition columns, and a
-- row per percentile (a CROSS JOIN with the six, grouped back into one row)
-- would aggregate six times the rows again: both cost several times more.
WITH sorted AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric,
    max(unit) AS unit,
    count(*) AS n,
    array_agg(value ORDER BY value) AS vals
  FROM slot_metrics
  GROUP BY run_id, cell_id, metric_source, workload_index, workload, job, direction, metric
),
positioned AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric,
    unit, n, vals,
    CAST(n - 1 AS DOUBLE) * (CAST(0 AS DOUBLE) / CAST(100 AS DOUBLE)) AS h0,
    CAST(n - 1 AS DOUBLE) * (CAST(50 AS DOUBLE) / CAST(100 AS DOUBLE)) AS h50,
    CAST(n - 1 AS DOUBLE) * (CAST(75 AS DOUBLE) / CAST(100 AS DOUBLE)) AS h75,
    CAST(n - 1 AS DOUBLE) * (CAST(90 AS DOUBLE) / CAST(100 AS DOUBLE)) AS h90,
    CAST(n - 1 AS DOUBLE) * (CAST(98 AS DOUBLE) / CAST(100 AS DOUBLE)) AS h98,
    CAST(n - 1 AS DOUBLE) * (CAST(100 AS DOUBLE) / CAST(100 AS DOUBLE)) AS h100
  FROM sorted
),
pivoted AS (
  SELECT
    run_id, cell_id, metric_source, workload_index, workload, job, direction, metric,
    unit,
    n AS slots,
    CASE WHEN h0 - floor(h0) >= 0.5E0
      THEN element_at(vals, CAST(ceil(h0) AS BIGINT) + 1)
        - (element_at(vals, CAST(ceil(h0) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h0) AS BIGINT) + 1))
          * (1.0E0 - (h0 - floor(h0)))
      ELSE element_at(vals, CAST(floor(h0) AS BIGINT) + 1)
        + (element_at(vals, CAST(ceil(h0) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h0) AS BIGINT) + 1))
          * (h0 - floor(h0))
    END AS p0,
    CASE WHEN h50 - floor(h50) >= 0.5E0
      THEN element_at(vals, CAST(ceil(h50) AS BIGINT) + 1)
        - (element_at(vals, CAST(ceil(h50) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h50) AS BIGINT) + 1))
          * (1.0E0 - (h50 - floor(h50)))
      ELSE element_at(vals, CAST(floor(h50) AS BIGINT) + 1)
        + (element_at(vals, CAST(ceil(h50) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h50) AS BIGINT) + 1))
          * (h50 - floor(h50))
    END AS p50,
    CASE WHEN h75 - floor(h75) >= 0.5E0
      THEN element_at(vals, CAST(ceil(h75) AS BIGINT) + 1)
        - (element_at(vals, CAST(ceil(h75) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h75) AS BIGINT) + 1))
          * (1.0E0 - (h75 - floor(h75)))
      ELSE element_at(vals, CAST(floor(h75) AS BIGINT) + 1)
        + (element_at(vals, CAST(ceil(h75) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h75) AS BIGINT) + 1))
          * (h75 - floor(h75))
    END AS p75,
    CASE WHEN h90 - floor(h90) >= 0.5E0
      THEN element_at(vals, CAST(ceil(h90) AS BIGINT) + 1)
        - (element_at(vals, CAST(ceil(h90) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h90) AS BIGINT) + 1))
          * (1.0E0 - (h90 - floor(h90)))
      ELSE element_at(vals, CAST(floor(h90) AS BIGINT) + 1)
        + (element_at(vals, CAST(ceil(h90) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h90) AS BIGINT) + 1))
          * (h90 - floor(h90))
    END AS p90,
    CASE WHEN h98 - floor(h98) >= 0.5E0
      THEN element_at(vals, CAST(ceil(h98) AS BIGINT) + 1)
        - (element_at(vals, CAST(ceil(h98) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h98) AS BIGINT) + 1))
          * (1.0E0 - (h98 - floor(h98)))
      ELSE element_at(vals, CAST(floor(h98) AS BIGINT) + 1)
        + (element_at(vals, CAST(ceil(h98) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h98) AS BIGINT) + 1))
          * (h98 - floor(h98))
    END AS p98,
    CASE WHEN h100 - floor(h100) >= 0.5E0
      THEN element_at(vals, CAST(ceil(h100) AS BIGINT) + 1)
        - (element_at(vals, CAST(ceil(h100) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h100) AS BIGINT) + 1))
          * (1.0E0 - (h100 - floor(h100)))
      ELSE element_at(vals, CAST(floor(h100) AS BIGINT) + 1)
        + (element_at(vals, CAST(ceil(h100) AS BIGINT) + 1)
           - element_at(vals, CAST(floor(h100) AS BIGINT) + 1))
          * (h100 - floor(h100))
    END AS p100
  FROM positioned
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
