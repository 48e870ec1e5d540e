-- cells: one row per (run, cell) with the cell's identity, from the slot rows.
-- Every slot of a cell carries the same cell fields; max() picks them and
-- tolerates a slot whose manifest is missing. slots_reported counts slot rows,
-- slots_succeeded those whose slot.json said SUCCEEDED.
SELECT
  run_id,
  cell_id,
  max(cell_index) AS cell_index,
  max(instance_type) AS instance_type,
  max(storage_label) AS storage_label,
  max(storage_type) AS storage_type,
  max(storage_detail) AS storage_detail,
  max(fleet_size) AS fleet_size,
  max("repeat") AS "repeat",
  count(*) AS slots_reported,
  sum(CASE WHEN status = 'SUCCEEDED' THEN 1 ELSE 0 END) AS slots_succeeded
FROM slots
GROUP BY run_id, cell_id
