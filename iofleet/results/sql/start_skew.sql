-- start_skew: one row per (run, cell): how far apart the cell's slots started.
-- Each slot records the wall-clock instant it passed the start barrier; they were
-- all released at one agreed instant (released_at; release_instants counts the
-- distinct instants recorded, 1 when the barrier worked).
-- start_skew_us: latest minus earliest pass instant, as the slots' own clocks read
--   them (barrier_passed_us: microseconds since the epoch, exact on every engine).
-- slots_passed: slots with a pass instant (a slot that never passed has none).
-- max_late_us: the longest any slot saw the release record after the instant
--   (0: every slot saw it in time and slept until the instant).
-- hosts: distinct host names among the slots that passed (locally: one clock).
-- clock_max_error_us / clock_est_error_us: the worst kernel error bound and
--   estimate (adjtimex maxerror / esterror) among the slots that passed; each
--   clock may be off true time by up to its maxerror, so the true spread is at
--   most start_skew_bound_us = start_skew_us + 2 * clock_max_error_us; on one
--   host every slot read the same clock and the bound is start_skew_us itself.
-- slots_unsynced: slots that passed while the kernel said the clock was not
--   synchronised (their maxerror is the kernel's 16 s ceiling).
WITH passed AS (
  SELECT
    run_id, cell_id, hostname, barrier_released_at, barrier_passed_at, barrier_passed_us,
    barrier_late_us, clock_synced, clock_max_error_us, clock_est_error_us
  FROM slots
  WHERE barrier_passed_us IS NOT NULL
),
skew AS (
  SELECT
    run_id,
    cell_id,
    count(*) AS slots_passed,
    count(DISTINCT hostname) AS hosts,
    count(DISTINCT barrier_released_at) AS release_instants,
    min(barrier_released_at) AS released_at,
    min(barrier_passed_at) AS first_passed_at,
    max(barrier_passed_at) AS last_passed_at,
    max(barrier_passed_us) - min(barrier_passed_us) AS start_skew_us,
    max(barrier_late_us) AS max_late_us,
    max(clock_max_error_us) AS clock_max_error_us,
    max(clock_est_error_us) AS clock_est_error_us,
    sum(CASE WHEN clock_synced = false THEN 1 ELSE 0 END) AS slots_unsynced
  FROM passed
  GROUP BY run_id, cell_id
)
SELECT
  c.run_id,
  c.cell_id,
  c.cell_index,
  c.instance_type,
  c.storage_label,
  c.storage_detail,
  c.fleet_size,
  c.slots_reported,
  coalesce(s.slots_passed, 0) AS slots_passed,
  s.release_instants,
  s.hosts,
  s.released_at,
  s.first_passed_at,
  s.last_passed_at,
  s.start_skew_us,
  s.max_late_us,
  s.clock_max_error_us,
  s.clock_est_error_us,
  s.slots_unsynced,
  CASE
    WHEN s.hosts = 1 THEN s.start_skew_us
    ELSE s.start_skew_us + 2 * s.clock_max_error_us
  END AS start_skew_bound_us
FROM cells c
LEFT JOIN skew s ON s.run_id = c.run_id AND s.cell_id = c.cell_id
