"""Local-cloud engines: moto server, DynamoDB Local and Trino, on loopback.

    python scripts/engines/engines.py install   # fetch from Maven Central into .engines/ (cached)
    python scripts/engines/engines.py up        # start all three, print endpoints, Ctrl-C stops

From Python (the pytest fixtures in tests/cloud/conftest.py do this):

    moto = start_moto()                      # Step Functions execution enabled
    ddb = start_dynamodb_local()
    trino = start_trino(moto.endpoint)       # hive catalog = Glue + S3 in moto
    ...
    trino.stop(); ddb.stop(); moto.stop()

Every engine gets a free port chosen at runtime, logs to `.engines/logs/`,
is ready when `start_*` returns (readiness is polled, never assumed) and dies
with the Python process that started it (PR_SET_PDEATHSIG) even if `stop()`
is never reached.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TypeVar

# Beside this file; its directory is on sys.path whether run as a script or
# imported by tests/cloud/conftest.py.
from trino_client import TrinoClient, TrinoError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
POM = HERE / "pom.xml"
TRINO_TEMPLATES = HERE / "trino" / "etc"
ENGINES_DIR = Path(os.environ.get("IOFLEET_ENGINES_DIR", ROOT / ".engines"))
LOG_DIR = ENGINES_DIR / "logs"
RUN_DIR = ENGINES_DIR / "run"
MAVEN_REPO = ENGINES_DIR / "m2"
JAVA25_HOME = Path(os.environ.get("IOFLEET_JAVA25_HOME", "/usr/lib/jvm/temurin-25-jdk-amd64"))

# Dummy credentials: moto accepts anything; Trino and boto3 need something.
AWS_REGION = "us-east-1"
AWS_ACCESS_KEY = "testing"
AWS_SECRET_KEY = "testing"
AWS_ACCOUNT = "123456789012"  # moto's default account

T = TypeVar("T")

DEFAULT_TIMEOUTS_S = {"moto": 60.0, "dynamodb-local": 60.0, "trino": 240.0}


class EngineError(RuntimeError):
    """An engine could not be installed or started (message is one line + log path)."""


# --------------------------------------------------------------------------- versions


def versions() -> dict[str, str]:
    """Engine versions, read from the POM (the single place they are written)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(POM).getroot().find("m:properties", ns)
    assert props is not None
    out: dict[str, str] = {}
    for key in ("dynamodb-local.version", "trino.version"):
        node = props.find(f"m:{key}", ns)
        assert node is not None and node.text
        out[key.removesuffix(".version")] = node.text.strip()
    return out


def dynamodb_local_home() -> Path:
    return ENGINES_DIR / f"dynamodb-local-{versions()['dynamodb-local']}"


def trino_home() -> Path:
    return ENGINES_DIR / f"trino-server-core-{versions()['trino']}"


# --------------------------------------------------------------------------- install

_COMPLETE = ".complete"


def _installed(home: Path) -> bool:
    return (home / _COMPLETE).is_file()


def install(*, quiet: bool = True) -> list[str]:
    """Fetch missing engines from Maven Central into .engines/; return what was fetched.

    A second call with everything present runs nothing (not even Maven).
    Maven's own repository is `.engines/m2`, so a deleted engine directory is
    rebuilt offline from it.
    """
    versions_ = versions()
    wanted: list[tuple[str, Path]] = []
    if not _installed(dynamodb_local_home()):
        wanted.append(("dependency:copy-dependencies@dynamodb-local", dynamodb_local_home()))
    if not _installed(trino_home()):
        wanted.append(("dependency:copy@trino", trino_home()))
    if not wanted:
        return []
    mvn = shutil.which("mvn")
    if mvn is None:
        raise EngineError("Maven (mvn) is not on PATH: install it (apt-get install maven)")
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / "install.log"
    cmd = [
        mvn,
        "-B",
        "-f",
        str(POM),
        f"-Dmaven.repo.local={MAVEN_REPO}",
        f"-Dengines.dir={ENGINES_DIR}",
        *(goal for goal, _ in wanted),
    ]
    if quiet:
        cmd.insert(2, "-q")
    with log.open("ab") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise EngineError(f"fetching engines from Maven Central failed; see {log}")
    if not _installed(trino_home()):
        _extract_trino(versions_["trino"])
    for _, home in wanted:
        (home / _COMPLETE).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    return [home.name for _, home in wanted]


def _extract_trino(version: str) -> None:
    """Server tarball + plugin zips -> .engines/trino-server-core-VERSION (atomic rename).

    Python's tarfile, not Maven's unpack goal: the tarball stores duplicate jars
    as hard links, which plexus-archiver turns into corrupt files.
    """
    downloads = ENGINES_DIR / "downloads"
    staging = ENGINES_DIR / f".staging-trino-{version}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    with tarfile.open(downloads / f"trino-server-core-{version}.tar.gz") as tar:
        tar.extractall(staging, filter="data")
    home = staging / f"trino-server-core-{version}"
    for plugin in ("hive", "memory"):
        with zipfile.ZipFile(downloads / f"trino-{plugin}-{version}.zip") as zipped:
            zipped.extractall(home / "plugin")
    shutil.rmtree(trino_home(), ignore_errors=True)
    home.rename(trino_home())
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(downloads, ignore_errors=True)  # the same files stay in .engines/m2


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded once here: nothing heavy may run after fork
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Engine:
    """A running engine: `.endpoint` (http://127.0.0.1:PORT) and `.stop()`."""

    name: str
    endpoint: str
    process: subprocess.Popen[bytes]
    log_path: Path
    cleanup: list[Path] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the process group (TERM, then KILL after `timeout_s`); idempotent."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout_s)
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def _spawn(
    name: str,
    cmd: list[str],
    port: int,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Engine:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{name}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: stop() kills children too
            preexec_fn=_die_with_parent,
        )
    return Engine(name, f"http://127.0.0.1:{port}", process, log_path)


def _wait_ready(engine: Engine, ready: Callable[[], bool], timeout_s: float) -> None:
    """Poll `ready()` until true; fail early if the process dies, or at the deadline."""
    deadline = time.monotonic() + timeout_s
    interval = 0.05
    while True:
        if not engine.running():
            engine.stop()
            raise EngineError(
                f"{engine.name} exited with status {engine.process.returncode} while starting; "
                f"log {engine.log_path}: {_log_tail(engine.log_path)}"
            )
        with contextlib.suppress(OSError, ValueError, urllib.error.URLError):
            if ready():
                return
        if time.monotonic() > deadline:
            engine.stop()
            raise EngineError(
                f"{engine.name} not ready after {timeout_s:.0f} s; log {engine.log_path}"
            )
        time.sleep(interval)  # polling interval, not synchronisation
        interval = min(interval * 1.5, 0.5)


def poll(
    check: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.05,
    max_interval_s: float = 0.5,
) -> T:
    """Call `check()` until it returns something truthy; return it, or raise at the deadline.

    Bounded polling for tests and readiness (a growing interval between polls,
    never a fixed sleep standing in for synchronisation).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not reached after {timeout_s:.0f} s")
        time.sleep(interval_s)
        interval_s = min(interval_s * 1.5, max_interval_s)


def _http(
    url: str, *, data: bytes | None = None, method: str = "GET", timeout: float = 5.0
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:  # a status code still proves the server is up
        return err.code, err.read()


def aws_env(endpoint: str | None = None) -> dict[str, str]:
    """Environment for boto3 clients talking to local engines (dummy credentials)."""
    env = {
        "AWS_ACCESS_KEY_ID": AWS_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET_KEY,
        "AWS_DEFAULT_REGION": AWS_REGION,
        "AWS_REGION": AWS_REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def _java_env(java_home: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    if java_home is not None:
        env["JAVA_HOME"] = str(java_home)
    return env


# --------------------------------------------------------------------------- moto


def start_moto(
    *,
    execute_state_machine: bool = True,
    timeout_s: float | None = None,
    module: str = "moto.server",
    cwd: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> Engine:
    """moto server (all services on one endpoint) with Step Functions execution enabled.

    The Step Functions setting must be made before any state machine is created
    (moto keeps executing and non-executing state machines in separate backends),
    so it is applied here, before the endpoint is handed out. `module` may name
    a wrapper that installs hooks and then runs `moto.server.main` (the
    local-cloud suite's `tests.cloud.localcloud.motoserver`).
    """
    port = free_port()
    cmd = [sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(port)]
    engine = _spawn(
        "moto", cmd, port, cwd=cwd, env={**os.environ, **aws_env(), **(extra_env or {})}
    )
    config_url = f"{engine.endpoint}/moto-api/config"
    _wait_ready(engine, lambda: _http(config_url)[0] < 300, timeout_s or DEFAULT_TIMEOUTS_S["moto"])
    if execute_state_machine:
        body = json.dumps({"stepfunctions": {"execute_state_machine": True}}).encode()
        # moto 5.2's GET/POST answer echoes only batch/lambda, so the status is
        # all there is to check here; the smoke test proves executions run.
        status, payload = _http(config_url, data=body, method="POST")
        if status >= 300:
            engine.stop()
            raise EngineError(f"moto refused the Step Functions config: {status} {payload[:200]!r}")
    return engine


# --------------------------------------------------------------------------- DynamoDB Local


def start_dynamodb_local(
    *, java_home: Path | None = None, timeout_s: float | None = None
) -> Engine:
    """DynamoDB Local, in memory. Any Java 11+ works; the default `java` is used unless given."""
    engine, wait_ready = launch_dynamodb_local(java_home=java_home, timeout_s=timeout_s)
    wait_ready()
    return engine


def launch_dynamodb_local(
    *, java_home: Path | None = None, timeout_s: float | None = None
) -> tuple[Engine, Callable[[], None]]:
    """`start_dynamodb_local` in two halves, as `launch_trino`."""
    install()
    home = dynamodb_local_home()
    java = str(java_home / "bin" / "java") if java_home else (shutil.which("java") or "java")
    port = free_port()
    cmd = [
        java,
        "-Xmx512m",
        f"-Djava.library.path={home / 'lib'}",  # sqlite4java's native .so lives next to the jars
        "-cp",
        str(home / "lib" / "*"),
        "com.amazonaws.services.dynamodbv2.local.main.ServerRunner",
        "-inMemory",
        # one database whatever the credentials: a local instance signs with its own role
        # session's keys (tests/cloud/localcloud/hooks.py), the Lambdas with the test's
        "-sharedDb",
        "-port",
        str(port),
    ]
    engine = _spawn("dynamodb-local", cmd, port, cwd=home, env=_java_env(java_home))
    # Any HTTP answer means the server is up (a bare GET is answered 400).
    return engine, lambda: _wait_ready(
        engine,
        lambda: _http(engine.endpoint)[0] > 0,
        timeout_s or DEFAULT_TIMEOUTS_S["dynamodb-local"],
    )


# --------------------------------------------------------------------------- Trino


# Catalogs rendered from catalog/hive.properties. `awsdatacatalog` is Athena's
# name for the Glue catalog: views written by Athena (or in its format) name it
# in their stored definition, so Trino needs a catalog of that name to expand them.
HIVE_CATALOG_ALIASES = ("awsdatacatalog",)


def _render_trino_etc(etc: Path, values: dict[str, str]) -> None:
    for template in TRINO_TEMPLATES.rglob("*"):
        if template.is_file():
            target = etc / template.relative_to(TRINO_TEMPLATES)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(Template(template.read_text()).substitute(values))
    hive = (etc / "catalog" / "hive.properties").read_text()
    for alias in HIVE_CATALOG_ALIASES:
        (etc / "catalog" / f"{alias}.properties").write_text(hive)


def _read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


# For a Trino that lives one test session and runs small queries on 2 shared cores:
# C1 only, and the serial collector instead of G1 (jvm.config's). C2's compiler threads
# were most of Trino's CPU: to ready 23.2 s -> 11.7 s with these, a set of 30 small
# queries 21.5 s -> 8.0 s (docs/decisions.md, decision 50). Not for the bench, whose
# Trino figure measures steady-state queries.
SHORT_LIVED_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
_G1_ONLY = ("-XX:+UseG1GC", "-XX:+ExplicitGCInvokesConcurrent")


def start_trino(
    aws_endpoint: str,
    *,
    heap: str = "2G",
    java_home: Path = JAVA25_HOME,
    timeout_s: float | None = None,
    short_lived: bool = False,
) -> Engine:
    """Trino single-node coordinator: catalogs `hive` (Glue + S3 at `aws_endpoint`) and `memory`.

    `short_lived`: the JVM options of SHORT_LIVED_JVM (the test session's Trino)."""
    engine, wait_ready = launch_trino(
        aws_endpoint, heap=heap, java_home=java_home, timeout_s=timeout_s, short_lived=short_lived
    )
    wait_ready()
    return engine


def launch_trino(
    aws_endpoint: str,
    *,
    heap: str = "2G",
    java_home: Path = JAVA25_HOME,
    timeout_s: float | None = None,
    short_lived: bool = False,
) -> tuple[Engine, Callable[[], None]]:
    """`start_trino` in two halves: the process is started now, and the returned
    callable polls it until it answers queries (EngineError, the engine stopped, if
    it does not). The caller may wait in another thread while it does other work;
    the process itself is started by the calling thread, because PR_SET_PDEATHSIG
    signals the child when the thread that forked it ends, not the process."""
    install()
    java = java_home / "bin" / "java"
    if not java.is_file():
        raise EngineError(f"Trino needs Java 24+; no java at {java} (set IOFLEET_JAVA25_HOME)")
    home = trino_home()
    port = free_port()
    run = RUN_DIR / f"trino-{port}"
    shutil.rmtree(run, ignore_errors=True)
    etc, data = run / "etc", run / "data"
    data.mkdir(parents=True)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    _render_trino_etc(
        etc,
        {
            "PORT": str(port),
            "NODE_ID": f"iofleet-{uuid.uuid4().hex[:12]}",
            "DATA_DIR": str(data),
            "PLUGIN_DIR": str(home / "plugin"),
            "CATALOG_DIR": str(etc / "catalog"),
            "LOG_DIR": str(LOG_DIR),
            "HEAP": heap,
            "REGION": AWS_REGION,
            "AWS_ENDPOINT": aws_endpoint,
            "AWS_ACCESS_KEY": AWS_ACCESS_KEY,
            "AWS_SECRET_KEY": AWS_SECRET_KEY,
        },
    )
    # What airlift's bin/launcher would run, minus its Python wrapper.
    jvm = [line.strip() for line in (etc / "jvm.config").read_text().splitlines()]
    if short_lived:
        jvm = [opt for opt in jvm if opt not in _G1_ONLY] + list(SHORT_LIVED_JVM)
    node = [f"-D{k}={v}" for k, v in _read_properties(etc / "node.properties").items()]
    cmd = [
        str(java),
        "-cp",
        str(home / "lib" / "*"),
        *(opt for opt in jvm if opt and not opt.startswith("#")),
        *node,
        f"-Dconfig={etc / 'config.properties'}",
        f"-Dlog.levels-file={etc / 'log.properties'}",
        "io.trino.server.TrinoServer",
    ]
    engine = _spawn("trino", cmd, port, cwd=run, env=_java_env(java_home))
    engine.cleanup.append(run)

    client = TrinoClient(engine.endpoint, timeout_s=30)

    def ready() -> bool:
        # /v1/info says the server finished starting; queries still fail with
        # NO_NODES_AVAILABLE until the coordinator has discovered itself as an
        # active worker, and a catalog can still be loading: so the check is
        # real queries, answered end to end: the node list (system catalog) and
        # the hive catalog's schemas (Glue in moto through the hive connector).
        status, body = _http(f"{engine.endpoint}/v1/info")
        if status != 200 or json.loads(body).get("starting") is not False:
            return False
        try:
            active = client.execute(
                "SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'"
            ).scalar()
            if not active:
                return False
            client.execute("SHOW SCHEMAS FROM hive")
        except TrinoError:
            return False
        return True

    return engine, lambda: _wait_ready(engine, ready, timeout_s or DEFAULT_TIMEOUTS_S["trino"])


# --------------------------------------------------------------------------- CLI


@contextlib.contextmanager
def all_engines() -> Iterator[dict[str, Engine]]:
    """moto, DynamoDB Local and Trino (on moto), all stopped on exit."""
    started: list[Engine] = []
    try:
        started.append(start_moto())
        started.append(start_dynamodb_local())
        started.append(start_trino(started[0].endpoint))
        yield {e.name: e for e in started}
    finally:
        for engine in reversed(started):
            engine.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engines.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="fetch the engines from Maven Central into .engines/ (cached)")
    sub.add_parser("up", help="start all engines, print their endpoints, stop on Ctrl-C")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            t0 = time.monotonic()
            fetched = install(quiet=True)
            what = ", ".join(fetched) if fetched else "nothing (all cached)"
            print(f"engines: fetched {what} in {time.monotonic() - t0:.1f} s into {ENGINES_DIR}")
            return 0
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill PID stops engines too
        with all_engines() as engines:
            for engine in engines.values():
                print(f"{engine.name:15} {engine.endpoint}  (log {engine.log_path})", flush=True)
            print("Ctrl-C stops them.", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
        return 0
    except EngineError as err:
        print(f"engines: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
