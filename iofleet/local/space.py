"""Room on the target for a local cell's files, checked before the run starts.

A local cell's slots run at once and each keeps its fio files until the slot ends
(iofleet/agent/target.py cleanup_target), so a cell needs about fleet_size x the
bytes its workloads lay out. Without this check a matrix planned for AWS (seed 004's
parallelism of 200 with 4 GiB jobs: 800 GiB) fills the file system the target is on,
every other program writing there included, before its slots fail with ENOSPC.

Counted per slot (iofleet.plan.expect.slot_file_bytes, which the AWS plan uses too):
each fio section's size x numjobs (fio divides a job's size between its nrfiles
files), a section that a later workload runs again once, at its largest, and 1 MiB per
ioping workload (its working-set file). App workloads bring their own sources and
build trees: not counted, and the message says so. One GiB is left free.

A target on a file system kept in memory (tmpfs, ramfs: /dev/shm, /tmp on many hosts)
takes its files out of the host's memory, whatever room the file system reports (a
tmpfs may be as large as the memory, and without swap nothing pages out): there the
files must also fit in the memory the host has available, less the quarter of its
memory (at least 1 GiB) that iofleet keeps free for everything else (the bound fio's
locked memory and buffers get, iofleet.plan.fiojobs.lockable_bytes), together with what
the cell's fio processes hold in memory at once while the files are there (locked and
I/O buffers, the workload holding most, each slot: iofleet.plan.fiojobs.held_at_once).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iofleet.plan.expect import slot_file_bytes

GIB = 1024**3
KEEP_FREE = GIB


def _existing(path: Path) -> Path:
    """The path, or its nearest existing parent (make_targets may not have run yet)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return path


def room_problems(plan: Any, targets: Sequence[Path]) -> list[tuple[int, str]]:
    """[(storage index, message)] for each storage whose largest cell will not fit."""
    problems: list[tuple[int, str]] = []
    for i, (storage, target) in enumerate(zip(plan.matrix.storage, targets, strict=True)):
        cells = [c for c in plan.cells if c.storage_label == storage.label]
        if not cells:
            continue
        needs = []
        for cell in cells:
            per_slot, uncounted = slot_file_bytes(cell.workload_payloads())
            needs.append((per_slot * cell.fleet_size, per_slot, cell, uncounted))
        need, per_slot, cell, uncounted = max(needs, key=lambda n: n[0])
        try:
            st = os.statvfs(_existing(target))
        except OSError:
            continue  # make_targets names what is wrong with the path
        free = st.f_bavail * st.f_frsize  # what an unprivileged writer may use
        memory = _memory_backed(_existing(target))
        # in memory, the files share it with what the slots' fio processes hold at once
        held = _fio_memory(cell) * cell.fleet_size if memory is not None else 0
        if need + KEEP_FREE <= free and (memory is None or need + held <= memory[1]):
            continue
        besides = f"; not counted: {', '.join(uncounted)}" if uncounted else ""
        if st.f_blocks == 0:  # procfs, sysfs: "0.0 MiB free" would send one looking for room
            has = "has no capacity (0 blocks: a kernel file system such as /proc or /sys)"
        elif memory is not None and need + held > memory[1]:
            beside = (
                f" beside the {_gib(held)} its fio processes hold at once (locked and I/O buffers)"
                if held
                else ""
            )
            has = (
                f"is {memory[0]}, kept in this machine's memory, which can spare "
                f"{_gib(memory[1])} for it{beside} (its available memory less a quarter of "
                "the memory, at least 1 GiB, kept free)"
            )
        else:
            has = f"has {_gib(free)} free (iofleet keeps {_gib(KEEP_FREE)} free)"
        problems.append(
            (
                i,
                f"cell {cell.cell_id} lays out ~{_gib(need)} of files at once "
                f"({cell.fleet_size} slots x {_gib(per_slot)}{besides}), and the file system of "
                f"{target} {has}: use smaller SIZE or parallelism, or a target with room",
            )
        )
    return problems


MEMORY_FILE_SYSTEMS = ("tmpfs", "ramfs")


def _fio_memory(cell: Any) -> int:
    """What one slot of `cell` holds in memory for fio at once: its fio workload that holds
    the most (they run one after the other)."""
    from iofleet.plan.fiojobs import JobFileError, held_at_once, memory_bytes

    memory = memory_bytes()
    if not memory:
        return 0
    most = 0
    for w in cell.workload_payloads():
        if w.get("kind") != "fio":
            continue
        try:
            most = max(most, held_at_once(w["name"], w.get("params") or {}, memory))
        except (KeyError, JobFileError):
            continue  # the matrix validation says what is wrong with it
    return most


def _memory_backed(path: Path) -> tuple[str, int] | None:
    """(fstype, bytes the host can spare for files there) when `path` is on a file system
    kept in memory; None otherwise, or when the memory figures cannot be read."""
    from iofleet.agent.manifest import mount_for_path
    from iofleet.plan.fiojobs import lockable_bytes, meminfo, memory_bytes

    mount = mount_for_path(path)
    if mount is None or mount.fstype not in MEMORY_FILE_SYSTEMS:
        return None
    total, available = memory_bytes(), meminfo("MemAvailable")
    if not total or available is None:
        return None
    keep = total - lockable_bytes(total)  # a quarter of the memory, at least 1 GiB
    return mount.fstype, max(0, available * 1024 - keep)


def _gib(n: float) -> str:
    return f"{n / GIB:,.1f} GiB" if n >= GIB else f"{n / 1024**2:,.1f} MiB"
