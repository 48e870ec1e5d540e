"""The embedded warehouse: DuckDB tables from `schema.py`, views from `sql/`.

The view SQL is written in Trino/Athena syntax (the single source, shared
with Glue/Athena) and transpiled to DuckDB with sqlglot (the transpiled text is
stored with the package, keyed by the source's hash: `duckdb_sql.py`); the
tables and views are brought up to date when a warehouse is opened, so an
existing warehouse always runs the current views. A warehouse records the
fingerprint of the schema it was last brought up to date with (table
`iofleet_schema`), and opening one that already has this iofleet's schema
skips that work (re-binding every view is most of an open's cost).

Loading is idempotent per run: `ingest_dir` rebuilds each run it finds under
the raw root from its raw objects, replacing that run's previous rows in one
transaction, unless the run is unchanged since it was last loaded into this
warehouse: a run's fingerprint (`_run_fingerprint`: each of its files' path, size,
mtime, ctime, inode and device, and `code_fingerprint`, the schema's and the row
code's hash) is stored in `ingested_runs` in the transaction that loads its rows, and
a run whose fingerprint matches keeps its rows and is not read (decision 52). Any
schema change (`_create`) empties `ingested_runs`: every run loads again.

Each artifact loads whole or becomes one `ingest_errors` row (its values are
checked against their columns in `iofleet.results.ingest`); should DuckDB refuse
the bulk load anyway, the runs are reloaded one artifact per transaction. Rows go
in through DuckDB's CSV reader (one temporary file per table, written by the stdlib
csv module), which keeps a thousand fio json+ files to seconds. Empty strings load as NULL. fio json+ histograms are one
`fio_latency_histograms` row per record, its bins as two BIGINT[] columns
(decision 46); the view `fio_latency_bins` gives them one row per bin.

A warehouse written before decision 46 holds `fio_latency_bins` as a table of one
row per bin: bringing it up to date (any open, as for every older schema) folds that
table into `fio_latency_histograms` (the same bins, so the same view results) and
drops it, in one transaction (`_migrate_bins_table`).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import duckdb

try:  # a dependency of the package; the stdlib encoder gives the same rows without it
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised by tests that hide it
    _orjson = None  # type: ignore[assignment]

from iofleet.results import sql as view_files
from iofleet.results.duckdb_sql import to_duckdb
from iofleet.results.ingest import (
    BIN_BLOCK_COLUMNS,
    BinBlock,
    bin_columns,
    error_row,
    merge_slot_rows,
    rows_and_bin_blocks,
    run_id_of,
)
from iofleet.results.parsers import decode_text
from iofleet.results.schema import (
    BY_NAME,
    FIO_LATENCY_BINS,
    FIO_LATENCY_HISTOGRAMS,
    INGEST_ERRORS,
    SLOTS,
    TABLES,
    Table,
)
from iofleet.testhook import pause

_ORDER_CELLS = "cell_index NULLS LAST, cell_id"
LOAD_PREFIX = ".iofleet-load-"  # the rows being loaded, as CSV and JSON: Warehouse._load_dir


def _json_line(row: Mapping[str, object]) -> bytes:
    """One JSON object and a newline (orjson when installed: the bin lists in C)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(row, option=_orjson.OPT_APPEND_NEWLINE)
        except _orjson.JSONEncodeError:  # e.g. a lone surrogate: the stdlib says which
            pass
    return (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _fold_bins_select(bins_table: str) -> str:
    """The `fio_latency_histograms` rows of a per-bin `fio_latency_bins` table (the layout
    before decision 46): one per key, bins ascending, a bin listed twice added up (as the
    views added them), rows with a NULL bin value or count left out."""
    key = ", ".join(f'"{c}"' for c in BIN_BLOCK_COLUMNS)
    return (
        f"SELECT {key}, list(bin_ns ORDER BY bin_ns) AS bins_ns, "
        "list(cnt ORDER BY bin_ns) AS counts FROM ("
        f'  SELECT {key}, bin_ns, CAST(sum("count") AS BIGINT) AS cnt '
        f"  FROM {bins_table} WHERE bin_ns IS NOT NULL "
        f'  AND "count" IS NOT NULL GROUP BY ALL'
        ") GROUP BY ALL"
    )


class _Unit(NamedTuple):
    """What one raw artifact gives: its key, its rows and its fio latency bin blocks."""

    key: str
    rows: Mapping[str, Sequence[dict]]
    blocks: Sequence[BinBlock]


def _gather(units: Iterable[_Unit]) -> tuple[dict[str, list[dict]], list[BinBlock]]:
    """Every unit's rows by table (the `slots` rows folded per slot) and bin blocks."""
    collected: dict[str, list[dict]] = {t.name: [] for t in TABLES}
    blocks: list[BinBlock] = []
    for unit in units:
        for table, rows in unit.rows.items():
            collected[table].extend(rows)
        blocks.extend(unit.blocks)
    # manifest.json sorts before slot.json within a slot folder, so the
    # final status wins when they are folded into one row.
    collected[SLOTS.name] = merge_slot_rows(collected[SLOTS.name])
    return collected, blocks


def _slot_units(units: Sequence[_Unit]) -> list[_Unit]:
    """The units with their `slots` rows moved into one unit per slot (the folded row)."""
    out: list[_Unit] = []
    slot_rows: dict[str, list[dict]] = {}
    for unit in units:
        rows = dict(unit.rows)
        for row in rows.pop(SLOTS.name, []):
            folder = unit.key.rsplit("/", 1)[0]
            slot_rows.setdefault(folder + "/slot", []).append(row)
        out.append(_Unit(unit.key, rows, unit.blocks))
    for key, folded in slot_rows.items():
        out.append(_Unit(key, {SLOTS.name: merge_slot_rows(folded)}, []))
    return out


def _files_under(top: str, parts: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """(path parts below `top`, path) of every file under a directory, as
    `Path(top).rglob("*")` filtered by `is_file()` finds them (symlinked files count,
    symlinked directories are not entered, unreadable directories are passed over), in
    one `scandir` per directory; sorting the parts gives `sorted(rglob)`'s order."""
    try:
        entries = list(os.scandir(top))
    except PermissionError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            yield from _files_under(entry.path, (*parts, entry.name))
        elif entry.is_file():
            yield (*parts, entry.name), entry.path


@lru_cache(maxsize=256)
def transpile_view(trino_sql: str) -> str:
    """One Trino/Athena SELECT rewritten for DuckDB (stored or transpiled now:
    `iofleet.results.duckdb_sql`)."""
    return to_duckdb(trino_sql)


SCHEMA_MARK = "iofleet_schema"  # one row: the fingerprint of the schema last created
INGESTED_RUNS = "ingested_runs"  # run_id -> the fingerprint of what its rows were loaded from
_INGESTED_RUNS_DDL = (
    f"CREATE OR REPLACE TABLE {INGESTED_RUNS} "
    "(run_id VARCHAR NOT NULL, fingerprint VARCHAR NOT NULL)"
)


@lru_cache(maxsize=1)
def schema_fingerprint() -> str:
    """A hash of every statement `Warehouse._create` runs (the tables' DDL, the views'
    DuckDB text) and of the DuckDB version: equal fingerprints, same schema."""
    digest = hashlib.sha256(f"duckdb {duckdb.__version__}\n".encode())
    for table in TABLES:
        digest.update(table.duckdb_ddl().encode() + b"\n")
    digest.update(_INGESTED_RUNS_DDL.encode() + b"\n")
    for name, trino_sql in view_files.all_views().items():
        digest.update(f"{name}\n{transpile_view(trino_sql)}\n".encode())
    return digest.hexdigest()


def _row_code() -> list[Path]:
    """The source files whose code turns raw artifacts into rows."""
    results = Path(__file__).resolve().parent
    return [
        results / "ingest.py",
        results / "schema.py",
        results / "warehouse.py",
        *sorted((results / "parsers").glob("*.py")),
        results.parent / "agent" / "payload.py",  # CELL_FIELDS
    ]


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of what makes rows of raw artifacts: the schema (`schema_fingerprint`), the
    Python version and the source of the modules that parse artifacts and build rows. A
    change to any of them makes `ingest_dir` load every run again. Should a source file
    not be readable, a value no warehouse holds: nothing is taken as unchanged."""
    digest = hashlib.sha256(f"{schema_fingerprint()}\npython {sys.version}\n".encode())
    try:
        for path in _row_code():
            digest.update(f"{path.name}\n".encode() + path.read_bytes() + b"\n")
    except OSError:
        return f"unreadable {uuid.uuid4()}"
    return digest.hexdigest()


def _run_fingerprint(code: str, files: Sequence[tuple[tuple[str, ...], str]]) -> str | None:
    """A hash of `code` and of each file of a run (every file under its folder, those the
    ingest passes over too): its path under the raw root, size, mtime, ctime, inode and
    device.
    ctime and inode change with every write, rename and copy, also when the copy kept the
    mtime and size. None when a file cannot be stat'ed (gone meanwhile, a dangling link):
    such a run is never taken as unchanged."""
    digest = hashlib.sha256(code.encode() + b"\n")
    for parts, path in files:
        try:
            st = os.stat(path)
        except OSError:
            return None
        digest.update(b"/".join(os.fsencode(p) for p in parts) + b"\0")
        digest.update(
            f"{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev}\n".encode()
        )
    return digest.hexdigest()


def _read_artifact(path: str) -> str:
    """The text of one raw artifact, read as `iofleet import` and the ingest Lambda read
    it (`decode_text`: the encoding a byte-order mark names, else UTF-8; undecodable
    bytes replaced: the parsers say so)."""
    with open(path, "rb") as f:
        return decode_text(f.read(), errors="replace")


@dataclass
class IngestStats:
    """What one `ingest_dir` did. `objects`, `skipped` and `rows` count the runs it
    loaded (`runs`); the runs it found unchanged since their last load (`unchanged`)
    keep their rows and are not read. `errors`: the `ingest_errors` rows the warehouse
    holds for every run under the root, loaded now or kept."""

    objects: int = 0
    skipped: int = 0
    runs: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    unchanged: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        counts = ", ".join(f"{n} {t}" for t, n in self.rows.items() if n and t != "ingest_errors")
        runs = f"{len(self.runs)} run" + ("" if len(self.runs) == 1 else "s")
        text = f"{self.objects} objects from {runs}: {counts or 'no rows'}"
        if self.unchanged:
            n = len(self.unchanged)
            text += f"; {n} unchanged run{'' if n == 1 else 's'} kept as loaded before"
        return text + (f"; {self.errors} ingest errors" if self.errors else "")


_OPEN: set[duckdb.DuckDBPyConnection] = set()  # every Warehouse connection not closed
_OPEN_LOCK = threading.Lock()


def interrupt_open_warehouses() -> None:
    """Stop the statement each open Warehouse connection runs (from any thread: a stop
    signal's watcher, iofleet.local.stopping.command_stops)."""
    with _OPEN_LOCK:
        cons = list(_OPEN)
    for con in cons:
        try:
            con.interrupt()
        except duckdb.Error:  # closed meanwhile
            pass


class Warehouse:
    """A DuckDB file (or ":memory:") holding the results tables and views."""

    def __init__(self, path: Path | str, read_only: bool = False) -> None:
        """`read_only`: for reading commands; the file is opened read-only and nothing is
        ever written to it. A warehouse of an older schema is then read through today's
        schema laid over it in this connection's temporary catalog (`_overlay`), not
        brought up to date; without `read_only` it is brought up to date on open."""
        self.path = str(path)
        self.where = f"--warehouse {self.path}"  # iofleet.results.source.ResultsSource
        if read_only:
            self._connect(read_only=True)
            with self._closed_on_failure():
                if not self._up_to_date():
                    self._overlay()
            return
        # no file (nor a write-ahead log DuckDB would replay into it): nothing to upgrade
        new = self.path == ":memory:" or not any(
            os.path.lexists(p) for p in (self.path, self.path + ".wal")
        )
        self._connect(read_only=False)
        with self._closed_on_failure():
            self._create(new)

    @contextmanager
    def _closed_on_failure(self) -> Iterator[None]:
        """Close the connection when the block fails or is interrupted: the caller never
        gets the Warehouse, so nobody else would, and an open connection keeps the file
        (and DuckDB's database instance: a read-only one refuses a read-write open of
        the same file in this process)."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def _connect(self, read_only: bool) -> None:
        self.con = duckdb.connect(self.path, read_only=read_only)
        with _OPEN_LOCK:
            _OPEN.add(self.con)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with _OPEN_LOCK:
            _OPEN.discard(self.con)
        self.con.close()

    def _create(self, new: bool = False) -> None:
        """Bring the schema up to date: the tables (an older warehouse gains new columns)
        and the views. Skipped when the warehouse's mark says it was brought up to date
        with exactly this schema (`schema_fingerprint`) and its catalog is still what it
        was then (the tables' and views' definitions as DuckDB holds them: an older
        iofleet that replaced the views, or a hand edit, does not match): re-creating
        the views binds every one of them, most of the cost of opening a warehouse.

        One transaction: the schema is there whole or not at all, and DuckDB commits
        (and syncs its write-ahead log) once instead of once per statement. `new`: the
        file did not exist before this connection, so it has no older tables whose
        columns need looking up (about 10 ms less: DuckDB's first catalog scan is
        the dearest, and the schema mark's read of the catalog then pays part of it)."""
        if not new and self._up_to_date():
            return
        if not new:  # an older warehouse's per-bin table (its own transaction)
            self._migrate_bins_table()
        self.con.execute("BEGIN TRANSACTION")
        try:
            for table in TABLES:
                self.con.execute(table.duckdb_ddl())
            if not new:  # a warehouse made by an older iofleet gains the new columns
                have = set(
                    self.con.execute(
                        "SELECT table_name, column_name FROM duckdb_columns()"
                    ).fetchall()
                )
                for table in TABLES:
                    for c in table.columns:
                        if (table.name, c.name) not in have:
                            self.con.execute(
                                f'ALTER TABLE {table.name} ADD COLUMN "{c.name}" {c.duckdb_type}'
                            )
            # the runs' fingerprints go with any change of schema: every run loads again
            self.con.execute(_INGESTED_RUNS_DDL)
            for name, trino_sql in view_files.all_views().items():
                self.con.execute(f"CREATE OR REPLACE VIEW {name} AS {transpile_view(trino_sql)}")
            self.con.execute(
                f"CREATE OR REPLACE TABLE {SCHEMA_MARK} (fingerprint VARCHAR, catalog VARCHAR)"
            )
            self.con.execute(
                f"INSERT INTO {SCHEMA_MARK} VALUES (?, ?)", [schema_fingerprint(), self._catalog()]
            )
            self.con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT has rolled back
                self.con.execute("ROLLBACK")
            raise

    def _overlay(self) -> None:
        """Today's schema over an older warehouse opened read-only, in the connection's
        temporary catalog (in memory; the file is not written): DuckDB resolves a name
        in `temp` before the file's own catalog, so every query, and every view, reads
        what `_create` would have made of the file:

        - a table the file lacks: an empty temporary table;
        - a table lacking newer columns: a temporary view of it with those columns NULL
          (what `ALTER TABLE ... ADD COLUMN` gives the rows it has);
        - `fio_latency_histograms` of a warehouse of the per-bin layout: its
          `fio_latency_bins` table folded as `_migrate_bins_table` folds it;
        - every view of iofleet/results/sql as a temporary view (an older iofleet's
          views in the file are hidden by them).
        """
        db = self.con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        here = '"' + db.replace('"', '""') + '".main.'
        tables = {
            name
            for (name,) in self.con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = ? "
                "AND schema_name = 'main'",
                [db],
            ).fetchall()
        }
        have = set(
            self.con.execute(
                "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = ?",
                [db],
            ).fetchall()
        )
        for table in TABLES:
            folded = table is FIO_LATENCY_HISTOGRAMS and FIO_LATENCY_BINS.name in tables
            if folded:
                select = _fold_bins_select(here + FIO_LATENCY_BINS.name)
                if table.name in tables:  # as the migration adds to such a table
                    select += f" UNION ALL SELECT * FROM {here}{table.name}"
            elif table.name not in tables:
                self.con.execute(table.duckdb_ddl().replace("CREATE TABLE", "CREATE TEMP TABLE"))
                continue
            elif all((table.name, c.name) in have for c in table.columns):
                continue
            else:
                select = "SELECT " + ", ".join(
                    f'"{c.name}"'
                    if (table.name, c.name) in have
                    else f'CAST(NULL AS {c.duckdb_type}) AS "{c.name}"'
                    for c in table.columns
                )
                select += f" FROM {here}{table.name}"
            self.con.execute(f"CREATE TEMP VIEW {table.name} AS {select}")
        for name, trino_sql in view_files.all_views().items():
            self.con.execute(f"CREATE TEMP VIEW {name} AS {transpile_view(trino_sql)}")

    def _migrate_bins_table(self) -> None:
        """A warehouse of an iofleet before decision 46 holds `fio_latency_bins` as a table,
        one row per bin: fold it into `fio_latency_histograms` (one row per key, bins
        ascending, a bin listed twice added up as the views add it) and drop it, in one
        transaction, so that the view of that name can take its place. Nothing to do for
        a new warehouse or one already migrated."""
        found = self.con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = ?",
            [FIO_LATENCY_BINS.name],
        ).fetchone()
        if not found or not found[0]:
            return
        key = ", ".join(f'"{c}"' for c in BIN_BLOCK_COLUMNS)
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.execute(FIO_LATENCY_HISTOGRAMS.duckdb_ddl())
            self.con.execute(
                f"INSERT INTO {FIO_LATENCY_HISTOGRAMS.name} ({key}, bins_ns, counts) "
                + _fold_bins_select(FIO_LATENCY_BINS.name)
            )
            self.con.execute(f"DROP TABLE {FIO_LATENCY_BINS.name}")
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def _up_to_date(self) -> bool:
        """The warehouse's mark says it was brought up to date with exactly this schema,
        and its catalog is still what it was then."""
        fingerprint = schema_fingerprint()
        try:
            found = self.con.execute(f"SELECT fingerprint, catalog FROM {SCHEMA_MARK}").fetchall()
        except (duckdb.CatalogException, duckdb.BinderException):  # new, or an older mark
            return False
        return (
            bool(found) and found[0][0] == fingerprint and found == [(fingerprint, self._catalog())]
        )

    def _catalog(self) -> str:
        """A hash of the definitions of this database's tables and views (but the mark's),
        as DuckDB holds them now."""
        rows = self.con.execute(
            "SELECT 'table', table_name, sql FROM duckdb_tables() "
            "WHERE database_name = current_database() AND table_name <> ? "
            "UNION ALL SELECT 'view', view_name, sql FROM duckdb_views() "
            "WHERE database_name = current_database() AND NOT internal ORDER BY 1, 2",
            [SCHEMA_MARK],
        ).fetchall()
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    # --- loading ---------------------------------------------------------

    def insert_rows(self, table: Table | str, rows: Sequence[Mapping[str, object]]) -> int:
        """Bulk-append rows (dicts keyed by column name) to a table; returns the count."""
        table = BY_NAME[table] if isinstance(table, str) else table
        if not rows:
            return 0
        columns = table.column_names
        try:  # rows made by Table.row() carry every column: pick them in C
            values = list(map(itemgetter(*columns), rows))
        except KeyError:
            values = [[row.get(c) for c in columns] for row in rows]
        with self._load_dir() as tmp:
            path = Path(tmp) / f"{table.name}.csv"
            with path.open("w", encoding="utf-8", newline="") as out:
                # csv's C writer is the fastest stdlib path; None and "" both
                # become an empty unquoted field, which DuckDB reads as NULL.
                csv.writer(out, lineterminator="\n").writerows(values)
            pause("temp-load")  # a test SIGKILLs the run here (iofleet.testhook)
            self._load_csv(table, path)
        return len(rows)

    def insert_bin_blocks(self, blocks: Sequence[BinBlock]) -> int:
        """Bulk-append one `fio_latency_histograms` row per block with bins; returns the
        row count (blocks without bins give no row).

        One JSON line per block (its shared columns, its bin values and counts as two
        arrays), read by DuckDB's JSON reader straight into the BIGINT[] columns: the
        lists are written by a C encoder (orjson when installed) and parsed in C, with
        no Python object per bin on either side. Measured against numpy arrays in an
        object column and the CSV text of the per-bin table (decision 46). An empty
        string loads as NULL, as it does through the CSV reader of `insert_rows`.
        """
        names = FIO_LATENCY_HISTOGRAMS.column_names
        count = 0
        with self._load_dir() as tmp:
            path = Path(tmp) / f"{FIO_LATENCY_HISTOGRAMS.name}.ndjson"
            with path.open("wb") as out:
                for block in blocks:
                    if not block.bins:
                        continue
                    values, counts = bin_columns(block.bins)
                    row = [None if v == "" else v for v in block.key]
                    out.write(_json_line(dict(zip(names, (*row, values, counts), strict=True))))
                    count += 1
            if not count:
                return 0
            cols = ", ".join(f'"{c}"' for c in names)
            spec = ", ".join(
                f"'{c.name}': '{c.duckdb_type}'" for c in FIO_LATENCY_HISTOGRAMS.columns
            )
            self.con.execute(
                f"INSERT INTO {FIO_LATENCY_HISTOGRAMS.name} ({cols}) SELECT {cols} FROM "
                "read_json(?, format = 'newline_delimited', columns = {" + spec + "})",
                [str(path)],
            )
        return count

    def _load_dir(self) -> tempfile.TemporaryDirectory[str]:
        """A temp directory for the rows being loaded: beside a warehouse file (in the
        --out whose lock the loading command holds, so that the next run there removes
        what a killed one left: iofleet.results.outdir.remove_dead_temps), in TMPDIR for
        an in-memory one."""
        memory = self.path == "" or self.path.startswith(":memory:")
        where = None if memory else os.path.dirname(os.path.abspath(self.path))
        return tempfile.TemporaryDirectory(prefix=LOAD_PREFIX, dir=where)

    def _load_csv(self, table: Table, path: Path) -> None:
        cols = ", ".join(f'"{c}"' for c in table.column_names)
        spec = ", ".join(f"'{c.name}': '{c.duckdb_type}'" for c in table.columns)
        self.con.execute(
            f"INSERT INTO {table.name} ({cols}) SELECT {cols} FROM read_csv(?, "
            "header = false, auto_detect = false, delim = ',', quote = '\"', "
            f"escape = '\"', columns = {{{spec}}}, "
            "timestampformat = '%Y-%m-%d %H:%M:%S.%f')",
            [str(path)],
        )

    def replace_runs(
        self,
        run_ids: Iterable[str],
        rows: Mapping[str, Sequence[dict]],
        bin_blocks: Sequence[BinBlock] = (),
        fingerprints: Mapping[str, str] | None = None,
    ) -> None:
        """Delete every row of these runs (and their fingerprints), then insert `rows`
        (and `bin_blocks`, and the runs' `fingerprints`), in one transaction."""
        run_ids = sorted(set(run_ids))
        self.con.execute("BEGIN TRANSACTION")
        try:
            if run_ids:  # one statement per table, whatever the number of runs
                for name in [t.name for t in TABLES] + [INGESTED_RUNS]:
                    self.con.execute(
                        f"DELETE FROM {name} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                        [run_ids],
                    )
            self._insert_fingerprints(fingerprints or {})
            for table in TABLES:
                self.insert_rows(table, rows.get(table.name, []))
            self.insert_bin_blocks(bin_blocks)
            self.con.execute(
                "UPDATE ingest_errors SET ingested_at = now() WHERE ingested_at IS NULL"
            )
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def _insert_fingerprints(self, fingerprints: Mapping[str, str]) -> None:
        if fingerprints:
            self.con.execute(
                f"INSERT INTO {INGESTED_RUNS} SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
                [list(fingerprints), list(fingerprints.values())],
            )

    def _fingerprints(self) -> dict[str, str]:
        """run_id -> the fingerprint its rows were last loaded with."""
        try:
            found = self.con.execute(f"SELECT run_id, fingerprint FROM {INGESTED_RUNS}").fetchall()
        except duckdb.CatalogException:  # not brought up to date (never by this class)
            return {}
        return dict(found)

    def ingest_dir(self, raw_root: Path | str) -> IngestStats:
        """(Re)load every run under a raw results root (layout: docs/internals.md) whose
        files or ingest code changed since it was last loaded into this warehouse.

        A run is passed over, its rows kept, when its fingerprint (`_run_fingerprint`:
        the code that makes rows, and each of its files' path, size, times and inode) is
        the one stored with its rows (table `ingested_runs`, written in the transaction
        that loads them); any other run is loaded again whole, as below. A run with an
        artifact that could not be read gets no fingerprint: the next ingest tries again.

        Each artifact loads whole or becomes one `ingest_errors` row: its values are
        checked against their columns first (`iofleet.results.ingest`), and should DuckDB still
        refuse the bulk load, the runs are loaded again artifact by artifact so that only
        the artifact it refuses is lost (`_replace_runs_one_by_one`).
        """
        root = Path(raw_root)
        stats = IngestStats(rows={t.name: 0 for t in TABLES})
        if not root.is_dir():
            return stats
        units: list[_Unit] = []
        code = code_fingerprint()
        loaded = self._fingerprints()
        fingerprints: dict[str, str] = {}
        # a run's folders, by the id their rows carry (`run_id_of`: the one the delete
        # goes by): one, but for a name that is not UTF-8 and the one spelled as its id
        folders: dict[str, list[tuple[str, tuple[str, ...], str]]] = {}
        for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            folders.setdefault(run_id_of(run_dir.name), []).extend(
                (run_dir.name, *found) for found in sorted(_files_under(str(run_dir)))
            )
        for run_id, files in folders.items():
            fingerprint = _run_fingerprint(code, [((d, *parts), p) for d, parts, p in files])
            if fingerprint is not None and loaded.get(run_id) == fingerprint:
                stats.unchanged.append(run_id)
                continue
            stats.runs.append(run_id)
            for dir_name, parts, path in files:
                relpath = "/".join((dir_name, *parts))
                name = parts[-1]
                if not name.endswith(".json") or name.startswith("."):
                    stats.skipped += 1
                    continue
                stats.objects += 1
                try:
                    text = _read_artifact(path)
                except OSError as exc:
                    reason = f"cannot read: {exc.strerror or exc}"
                    error = error_row(run_id, relpath, reason)
                    units.append(_Unit(relpath, {INGEST_ERRORS.name: [error]}, []))
                    fingerprint = None  # perhaps readable next time: not taken as unchanged
                    continue
                rows, bin_blocks = rows_and_bin_blocks(relpath, text)
                units.append(_Unit(relpath, rows, bin_blocks or []))
            if fingerprint is not None:
                fingerprints[run_id] = fingerprint
        if stats.runs:
            collected, blocks = _gather(units)
            try:
                self.replace_runs(stats.runs, collected, blocks, fingerprints)
            except duckdb.InterruptException:  # stopped (con.interrupt()): not the data's fault
                raise
            except (duckdb.Error, UnicodeError):
                collected, blocks = self._replace_runs_one_by_one(stats.runs, units, fingerprints)
            stats.rows = {name: len(rows) for name, rows in collected.items()}
            stats.rows[FIO_LATENCY_HISTOGRAMS.name] += sum(1 for b in blocks if b.bins)
        stats.errors = stats.rows[INGEST_ERRORS.name]
        if stats.unchanged:
            kept = self.con.execute(
                f"SELECT count(*) FROM {INGEST_ERRORS.name} "
                "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))",
                [stats.unchanged],
            ).fetchone()
            stats.errors += kept[0] if kept else 0
        return stats

    def _replace_runs_one_by_one(
        self,
        run_ids: Sequence[str],
        units: Sequence[_Unit],
        fingerprints: Mapping[str, str] | None = None,
    ) -> tuple[dict[str, list[dict]], list[BinBlock]]:
        """`replace_runs` one artifact (one slot, for the folded `slots` rows) per
        transaction; an artifact DuckDB refuses becomes an `ingest_errors` row. The runs'
        fingerprints go in with those rows, in the last transaction: stopped before it,
        the runs are loaded again next time.

        Returns what was loaded, as `_gather` would give it.
        """
        self.replace_runs(run_ids, {})
        loaded: list[_Unit] = []
        errors: list[dict] = []
        for unit in _slot_units(units):
            try:
                self.con.execute("BEGIN TRANSACTION")
                for table in TABLES:
                    self.insert_rows(table, unit.rows.get(table.name, []))
                self.insert_bin_blocks(unit.blocks)
                self.con.execute("COMMIT")
                loaded.append(unit)
            except (duckdb.Error, UnicodeError) as exc:
                self.con.execute("ROLLBACK")
                run_id = run_id_of(unit.key)
                message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                errors.append(error_row(run_id, unit.key, f"the warehouse refused it: {message}"))
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.insert_rows(INGEST_ERRORS, errors)
            self.con.execute(
                "UPDATE ingest_errors SET ingested_at = now() WHERE ingested_at IS NULL"
            )
            self._insert_fingerprints(fingerprints or {})
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        collected, blocks = _gather(loaded)
        collected[INGEST_ERRORS.name] += errors
        return collected, blocks

    # --- reading ---------------------------------------------------------

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, list(params) if params is not None else None)
        names = [d[0] for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    @contextmanager
    def one_thread(self) -> Iterator[None]:
        """Queries inside the block run on one thread, so that a report read twice is the
        same to the byte: DuckDB's parallel aggregation adds a group's doubles in an
        order that varies from one run to the next, and an avg() then differs in its last
        digit (expected_vs_measured's iops_mean 9465.574102 and 9465.574101999999 from one
        warehouse). One run's rows are few: one thread costs little."""
        row = self.con.execute("SELECT current_setting('threads')").fetchone()
        before = int(row[0]) if row else 1
        self.con.execute("SET threads = 1")
        try:
            yield
        finally:
            with contextlib.suppress(duckdb.Error):  # a connection an interrupt closed
                self.con.execute(f"SET threads = {before}")

    def select(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        """One Trino/Athena SELECT (iofleet.results.source.ResultsSource), transpiled."""
        return self.query(transpile_view(sql), list(params))

    def run_ids(self) -> list[str]:
        """Every run id, newest first (by started_at, then id)."""
        rows = self.query(
            "SELECT run_id, max(started_at) AS started FROM ("
            " SELECT run_id, started_at FROM runs"
            " UNION ALL SELECT run_id, CAST(NULL AS TIMESTAMP) FROM slots"
            " UNION ALL SELECT run_id, CAST(NULL AS TIMESTAMP) FROM fio_results"
            ") GROUP BY run_id ORDER BY started DESC NULLS LAST, run_id DESC"
        )
        return [r["run_id"] for r in rows]

    def latest_run_id(self) -> str | None:
        ids = self.run_ids()
        return ids[0] if ids else None

    def run_info(self, run_id: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def cell_percentiles(self, run_id: str) -> list[dict[str, Any]]:
        return self.query(
            "SELECT * FROM cell_percentiles WHERE run_id = ? ORDER BY "
            "metric_source, workload_index, workload, job NULLS FIRST, direction NULLS FIRST, "
            f"metric, {_ORDER_CELLS}",
            [run_id],
        )

    def fleet_latency(self, run_id: str) -> list[dict[str, Any]]:
        return self.query(
            "SELECT * FROM fleet_latency WHERE run_id = ? ORDER BY "
            f"workload_index, workload, job, direction, {_ORDER_CELLS}",
            [run_id],
        )

    def ingest_errors(self, run_id: str) -> list[dict[str, Any]]:
        return self.query(
            "SELECT object_key, reason FROM ingest_errors WHERE run_id = ? ORDER BY object_key",
            [run_id],
        )
