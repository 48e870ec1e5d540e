-- fleet_totals: per run, cell, fio workload, job and direction, the fleet's
-- aggregate IOPS and throughput over the window where all its slots ran, next
-- to the plan's ceiling for the whole fleet and the throttling evidence
-- CloudWatch gave (burst_metrics). docs/decisions.md "fleet totals" record.
--
-- Each slot's job window, on the slot's own clock: where fio says when the job
-- began its I/O (fio_started_ms, fio's job_start: fio 3.36 and later, the
-- release Ubuntu 24.04 installs on the fleet), start = that, end = start + the
-- job's runtime_ms (fio's own figure), in any group (fio takes job_start
-- again when a ramp_time ends: the window is the measured I/O). Else, for a
-- workload whose jobs fio reports in one group, end = when fio ended the run
-- (fio_ended_ms, fio's timestamp_ms), start = end - runtime_ms. So app and
-- ioping workloads before it, fio's file layout and a slot that started late
-- all count as they happened. fio's groupid does not say whether a later group
-- waited (stonewall) or ran beside (new_group), so a workload of several groups
-- from an older fio, and rows without fio's end (kept from before), are placed
-- as before: start = the instant the slot passed the start barrier
-- (slots.barrier_passed_us) plus the runtimes of the slot's earlier fio
-- workloads, end = start + runtime_ms.
-- The overlap window is [latest start, earliest end] over the slots with a
-- row; overlap_s = its length, 0 when the slots never all ran at once. Each
-- slot's I/O in the window is apportioned by its mean rate over its own run
-- (iops x overlap_s), so the fleet's aggregate rate over the window is the sum
-- of the slots' mean rates: total_iops,
-- total_bw_bytes. overlap_fraction = overlap_s / the longest slot's runtime:
-- how much of the measurement the fleet really spent together.
--
-- expected_total_* = the plan's per-slot ceiling (expectations; shared file
-- systems already split by fleet size) x the cell's fleet size.
-- iops_ratio / bw_ratio = total / expected_total. binding: which limit bound,
-- from the evidence in this order:
--   'suspect: above ceiling'   a ratio above 1.05 (page cache, unfilled files,
--                              lazy snapshot load: the storage was not measured);
--   'volume-exceeded-check'    EBS VolumeIOPSExceededCheck or
--                              VolumeThroughputExceededCheck reported 1;
--   'instance-exceeded-check'  the instance's InstanceEBSIOPSExceededCheck or
--                              InstanceEBSThroughputExceededCheck reported 1;
--   'burst-bucket empty'       a burst balance reached 0 (BurstBalance,
--                              BurstCreditBalance, EBSIOBalance%, EBSByteBalance%);
--   'efs io limit'             EFS PercentIOLimit reached 100;
--   limited_by                 a ratio of 0.9 or more: the plan's predicted limit;
--   'unknown'                  no published ceiling (local storage);
--   'below ceiling'            under 90% of every ceiling with no throttling
--                              evidence: the limit is elsewhere (CPU, queue depth, job).
WITH per_slot AS (
  SELECT
    run_id, cell_id, slot_index, workload_index, workload, job, direction,
    sum(CAST(iops AS DOUBLE)) AS iops,
    sum(CAST(bw_bytes AS DOUBLE)) AS bw_bytes,
    max(runtime_ms) AS runtime_ms,
    max(fio_ended_ms) AS fio_ended_ms,
    min(fio_started_ms) AS fio_started_ms
  FROM fio_results
  WHERE coalesce("error", 0) = 0
  GROUP BY run_id, cell_id, slot_index, workload_index, workload, job, direction
),
fio_groups AS (
  SELECT
    run_id, cell_id, slot_index, workload_index,
    count(DISTINCT groupid) AS groups, count(groupid) AS grouped, count(*) AS all_rows
  FROM fio_results
  WHERE coalesce("error", 0) = 0
  GROUP BY run_id, cell_id, slot_index, workload_index
),
workload_ms AS (
  SELECT run_id, cell_id, slot_index, workload_index, max(runtime_ms) AS ms
  FROM fio_results
  WHERE coalesce("error", 0) = 0
  GROUP BY run_id, cell_id, slot_index, workload_index
),
offsets AS (
  SELECT
    a.run_id, a.cell_id, a.slot_index, a.workload_index,
    coalesce(sum(CASE WHEN b.workload_index < a.workload_index THEN b.ms END), 0) AS offset_ms
  FROM workload_ms a
  JOIN workload_ms b
    ON b.run_id = a.run_id AND b.cell_id = a.cell_id AND b.slot_index = a.slot_index
  GROUP BY a.run_id, a.cell_id, a.slot_index, a.workload_index
),
ends AS (
  SELECT
    p.*,
    CASE WHEN p.fio_ended_ms IS NOT NULL AND g.groups = 1 AND g.grouped = g.all_rows
      THEN CAST(p.fio_ended_ms AS BIGINT) * 1000
    END AS fio_end_us
  FROM per_slot p
  JOIN fio_groups g
    ON g.run_id = p.run_id AND g.cell_id = p.cell_id AND g.slot_index = p.slot_index
    AND g.workload_index = p.workload_index
),
windows AS (
  SELECT
    p.run_id, p.cell_id, p.slot_index, p.workload_index, p.workload, p.job, p.direction,
    p.iops, p.bw_bytes, p.runtime_ms,
    coalesce(
      CAST(p.fio_started_ms AS BIGINT) * 1000,
      p.fio_end_us - CAST(p.runtime_ms AS BIGINT) * 1000,
      s.barrier_passed_us + CAST(o.offset_ms AS BIGINT) * 1000
    ) AS start_us,
    coalesce(
      (CAST(p.fio_started_ms AS BIGINT) + CAST(p.runtime_ms AS BIGINT)) * 1000,
      p.fio_end_us,
      s.barrier_passed_us + (CAST(o.offset_ms AS BIGINT) + CAST(p.runtime_ms AS BIGINT)) * 1000
    ) AS end_us
  FROM ends p
  JOIN offsets o
    ON o.run_id = p.run_id AND o.cell_id = p.cell_id AND o.slot_index = p.slot_index
    AND o.workload_index = p.workload_index
  LEFT JOIN slots s
    ON s.run_id = p.run_id AND s.cell_id = p.cell_id AND s.slot_index = p.slot_index
),
totals AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction,
    count(*) AS slots,
    count(start_us) AS slots_timed,
    sum(iops) AS total_iops,
    sum(bw_bytes) AS total_bw_bytes,
    max(runtime_ms) AS longest_ms,
    max(start_us) AS window_start_us,
    min(end_us) AS window_end_us
  FROM windows
  GROUP BY run_id, cell_id, workload_index, workload, job, direction
),
evidence AS (
  SELECT
    run_id, cell_id,
    max(CASE WHEN metric IN ('VolumeIOPSExceededCheck', 'VolumeThroughputExceededCheck')
      THEN value END) AS volume_exceeded,
    max(CASE WHEN metric IN ('InstanceEBSIOPSExceededCheck', 'InstanceEBSThroughputExceededCheck')
      THEN value END) AS instance_exceeded,
    min(CASE WHEN metric IN ('BurstBalance', 'EBSIOBalance%', 'EBSByteBalance%')
      THEN value END) AS min_balance_pct,
    min(CASE WHEN metric = 'BurstCreditBalance' THEN value END) AS min_credit_bytes,
    max(CASE WHEN metric = 'PercentIOLimit' THEN value END) AS max_io_limit_pct
  FROM burst_metrics
  GROUP BY run_id, cell_id
),
expected AS (
  SELECT
    run_id, cell_id, workload_index, workload, job, direction,
    max(expected_iops) AS expected_iops,
    max(expected_bw_bytes) AS expected_bw_bytes,
    max(limited_by) AS limited_by
  FROM expectations
  GROUP BY run_id, cell_id, workload_index, workload, job, direction
),
joined AS (
  SELECT
    t.run_id, t.cell_id, c.cell_index, c.instance_type, c.storage_label, c.storage_type,
    c.storage_detail, c.fleet_size, c."repeat",
    t.workload_index, t.workload, t.job, t.direction,
    t.slots, t.slots_timed,
    t.total_iops, t.total_bw_bytes,
    CAST(t.longest_ms AS DOUBLE) / CAST(1000 AS DOUBLE) AS longest_s,
    CASE WHEN t.slots_timed = t.slots THEN t.window_start_us END AS window_start_us,
    CASE WHEN t.slots_timed = t.slots THEN t.window_end_us END AS window_end_us,
    CASE
      WHEN t.slots_timed < t.slots THEN NULL
      WHEN t.window_end_us > t.window_start_us
        THEN CAST(t.window_end_us - t.window_start_us AS DOUBLE) / CAST(1000000 AS DOUBLE)
      ELSE 0.0
    END AS overlap_s,
    e.expected_iops * CAST(c.fleet_size AS DOUBLE) AS expected_total_iops,
    CAST(e.expected_bw_bytes AS DOUBLE) * CAST(c.fleet_size AS DOUBLE) AS expected_total_bw_bytes,
    e.limited_by,
    v.volume_exceeded, v.instance_exceeded, v.min_balance_pct, v.min_credit_bytes,
    v.max_io_limit_pct
  FROM totals t
  LEFT JOIN cells c ON c.run_id = t.run_id AND c.cell_id = t.cell_id
  LEFT JOIN expected e
    ON e.run_id = t.run_id AND e.cell_id = t.cell_id AND e.workload_index = t.workload_index
    AND e.workload = t.workload AND e.job = t.job AND e.direction = t.direction
  LEFT JOIN evidence v ON v.run_id = t.run_id AND v.cell_id = t.cell_id
),
ratios AS (
  SELECT
    j.*,
    CASE WHEN j.longest_s > 0 THEN CAST(j.overlap_s AS DOUBLE) / CAST(j.longest_s AS DOUBLE) END
      AS overlap_fraction,
    CASE WHEN j.expected_total_iops > 0 
      THEN CAST(j.total_iops AS DOUBLE) / CAST(j.expected_total_iops AS DOUBLE) END
      AS iops_ratio,
    CASE WHEN j.expected_total_bw_bytes > 0 
      THEN CAST(j.total_bw_bytes AS DOUBLE) / CAST(j.expected_total_bw_bytes AS DOUBLE) END
      AS bw_ratio
  FROM joined j
)
SELECT
  r.*,
  CASE
    WHEN r.iops_ratio > 1.05 OR r.bw_ratio > 1.05 THEN 'suspect: above ceiling'
    WHEN r.volume_exceeded >= 1 THEN 'volume-exceeded-check'
    WHEN r.instance_exceeded >= 1 THEN 'instance-exceeded-check'
    WHEN r.min_balance_pct <= 0 OR r.min_credit_bytes <= 0 THEN 'burst-bucket empty'
    WHEN r.max_io_limit_pct >= 100 THEN 'efs io limit'
    WHEN r.iops_ratio >= 0.9 OR r.bw_ratio >= 0.9 THEN r.limited_by
    WHEN r.limited_by IS NULL OR r.limited_by = 'unknown' THEN 'unknown'
    ELSE 'below ceiling'
  END AS binding,
  coalesce(r.iops_ratio > 1.05, false) OR coalesce(r.bw_ratio > 1.05, false) AS suspect
FROM ratios r
