-- ioping_latency: per run, cell, ioping workload and operation, the latency ladder
-- of every timed request of every slot pooled (the cell's requests, not a slot
-- summary). The p-th percentile is the smallest request time whose rank reaches
-- ceil(p/100 x requests) (nearest rank, as fleet_latency reads fio's histograms);
-- the rank test is integer arithmetic in basis points, so engines agree exactly.
-- A query (not a view): callers filter it by run id.
WITH ranked AS (
  SELECT
    run_id, cell_id, slot_index, workload_index, operation, time_ns,
    row_number() OVER (
      PARTITION BY run_id, cell_id, workload_index, operation ORDER BY time_ns
    ) AS rn,
    count(*) OVER (PARTITION BY run_id, cell_id, workload_index, operation) AS n
  FROM ioping_requests
  WHERE time_ns IS NOT NULL
),
ladder AS (
  SELECT
    run_id, cell_id, workload_index, operation,
    count(DISTINCT slot_index) AS slots,
    count(*) AS requests,
    min(time_ns) AS p0_ns,
    min(CASE WHEN rn * 10000 >= 5000 * n THEN time_ns END) AS p50_ns,
    min(CASE WHEN rn * 10000 >= 7500 * n THEN time_ns END) AS p75_ns,
    min(CASE WHEN rn * 10000 >= 9000 * n THEN time_ns END) AS p90_ns,
    min(CASE WHEN rn * 10000 >= 9800 * n THEN time_ns END) AS p98_ns,
    min(CASE WHEN rn * 10000 >= 9900 * n THEN time_ns END) AS p99_ns,
    min(CASE WHEN rn * 10000 >= 9990 * n THEN time_ns END) AS p99_9_ns,
    min(CASE WHEN rn * 10000 >= 9999 * n THEN time_ns END) AS p99_99_ns,
    max(time_ns) AS p100_ns
  FROM ranked
  GROUP BY run_id, cell_id, workload_index, operation
)
SELECT
  l.run_id,
  l.cell_id,
  c.cell_index,
  c.instance_type,
  c.storage_label,
  c.storage_type,
  c.storage_detail,
  c.fleet_size,
  c."repeat",
  l.workload_index,
  'ioping' AS workload,
  l.operation AS direction,
  l.slots,
  l.requests,
  l.p0_ns,
  l.p50_ns,
  l.p75_ns,
  l.p90_ns,
  l.p98_ns,
  l.p99_ns,
  l.p99_9_ns,
  l.p99_99_ns,
  l.p100_ns
FROM ladder l
LEFT JOIN cells c ON c.run_id = l.run_id AND c.cell_id = l.cell_id
