-- failures: why slots and workloads failed, one row per reason. A query (not a
-- view): callers filter it by run id. level:
--   'slot'  a slot whose slot.json said FAILED or gave an error, or that has no
--           final status (no slot.json: the agent never finished);
--   'fio'   a fio job that reported an error code (fio_results.error <> 0);
--   'app'   an app phase that exited non-zero.
SELECT
  run_id, cell_id, slot_index, CAST(NULL AS INTEGER) AS workload_index, 'slot' AS level,
  coalesce(status, 'NO STATUS') AS status, exit_code,
  coalesce(error, CASE WHEN status IS NULL THEN 'no slot.json: the slot never reported' END)
    AS reason
FROM slots
WHERE status IS NULL OR status <> 'SUCCEEDED' OR error IS NOT NULL
UNION ALL
SELECT
  run_id, cell_id, slot_index, workload_index, 'fio' AS level, 'FAILED' AS status,
  "error" AS exit_code,
  concat(coalesce(workload, '?'), ': job ', coalesce(job, '?'), ' (', coalesce(direction, '?'),
    '): fio error ', CAST("error" AS VARCHAR)) AS reason
FROM fio_results
WHERE coalesce("error", 0) <> 0
UNION ALL
SELECT
  run_id, cell_id, slot_index, workload_index, 'app' AS level, 'FAILED' AS status, exit_code,
  concat(coalesce(app, '?'), ' ', coalesce(phase, '?'), ': exit ', CAST(exit_code AS VARCHAR))
    AS reason
FROM app_runs
WHERE exit_code IS NOT NULL AND exit_code <> 0
