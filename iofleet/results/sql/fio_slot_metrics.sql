-- fio_slot_metrics: the fio metrics of slot_metrics, wide: one row per (run,
-- cell, slot, workload, job, direction) of fio_results, rows with error <> 0
-- left out. When one fio job name appears several times in a slot's output
-- (numjobs without group_reporting), the slot's iops and bw_bytes are the sums
-- over those entries and the latency metrics the maximum (the slowest thread).
-- For latency merged exactly across threads and slots see fleet_latency.
--
-- The one place that says which fio rows count and how a slot's entries
-- combine: slot_metrics unpivots these rows, cell_percentiles sorts each
-- column per cell (one pass over fio_results for both).
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
