-- fleet_latency: fio completion latency per run, cell, workload, job and
-- direction, from the json+ histogram bins of every slot merged together.
--
-- Rule (the one fio applies to its own bins): the p-th percentile is the
-- smallest bin value whose cumulative count reaches ceil(p / 100 * total).
-- With integer counts, running >= ceil(p * total / 100) is the same as
-- running * 100000 >= (p * 1000) * total, which is exact in BIGINT on every
-- engine (no floating point, no integer division). p is the double fio holds:
-- 50, 75, 90, 98 and 99 exactly, 99.99 a hair below (the same ceiling for any
-- total below 10^12), 99.9 a hair above, so where 99.9 * total / 100 is a whole
-- number fio needs one more sample (1,000 samples: the 1,000th): for p99.9 the
-- comparison is strict (>), which is that rule for any total below 10^13.
-- p0 is the smallest non-empty bin and p100 the largest. Bins of every slot are
-- included, also from jobs that reported an error (the I/Os they completed were
-- timed).
WITH merged AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction, bin_ns,
    CAST(sum("count") AS BIGINT) AS cnt
  FROM fio_latency_bins
  WHERE "count" > 0
  GROUP BY run_id, cell_id, workload_index, workload, job, direction, bin_ns
),
slot_counts AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction,
    count(DISTINCT slot_index) AS slots
  FROM fio_latency_bins
  WHERE "count" > 0
  GROUP BY run_id, cell_id, workload_index, workload, job, direction
),
running AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction, bin_ns, cnt,
    CAST(sum(cnt) OVER (
      PARTITION BY run_id, cell_id, workload_index, workload, job, direction
      ORDER BY bin_ns
      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS BIGINT) AS cum,
    CAST(sum(cnt) OVER (
      PARTITION BY run_id, cell_id, workload_index, workload, job, direction
    ) AS BIGINT) AS total
  FROM merged
),
rule AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction,
    max(total) AS total_count,
    min(bin_ns) AS p0_ns,
    min(CASE WHEN cum * 100000 >= 50000 * total THEN bin_ns END) AS p50_ns,
    min(CASE WHEN cum * 100000 >= 75000 * total THEN bin_ns END) AS p75_ns,
    min(CASE WHEN cum * 100000 >= 90000 * total THEN bin_ns END) AS p90_ns,
    min(CASE WHEN cum * 100000 >= 98000 * total THEN bin_ns END) AS p98_ns,
    min(CASE WHEN cum * 100000 >= 99000 * total THEN bin_ns END) AS p99_ns,
    min(CASE WHEN cum * 100000 > 99900 * total THEN bin_ns END) AS p99_9_ns,
    min(CASE WHEN cum * 100000 >= 99990 * total THEN bin_ns END) AS p99_99_ns,
    max(bin_ns) AS p100_ns
  FROM running
  GROUP BY run_id, cell_id, workload_index, workload, job, direction
)
SELECT
  r.run_id,
  r.cell_id,
  c.cell_index,
  c.instance_type,
  c.storage_label,
  c.storage_type,
  c.storage_detail,
  c.fleet_size,
  c."repeat",
  r.workload_index,
  r.workload,
  r.job,
  r.direction,
  s.slots,
  r.total_count,
  r.p0_ns,
  r.p50_ns,
  r.p75_ns,
  r.p90_ns,
  r.p98_ns,
  r.p99_ns,
  r.p99_9_ns,
  r.p99_99_ns,
  r.p100_ns
FROM rule r
JOIN slot_counts s
  ON s.run_id = r.run_id AND s.cell_id = r.cell_id AND s.workload_index = r.workload_index
  AND s.workload IS NOT DISTINCT FROM r.workload AND s.job IS NOT DISTINCT FROM r.job
  AND s.direction IS NOT DISTINCT FROM r.direction
LEFT JOIN cells c ON c.run_id = r.run_id AND c.cell_id = r.cell_id
