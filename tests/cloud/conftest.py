"""Local-cloud fixtures: real engines on loopback, started once per session.

- `moto_server`      moto (S3, SQS, EC2, IAM, Glue, EventBridge, Step Functions
                     with execution enabled) -> `engines.Engine` (`.endpoint`)
- `dynamodb_local`   DynamoDB Local, in memory
- `trino_server`     Trino 476: catalogs `hive` and `awsdatacatalog` (Glue + S3
                     in moto), `memory`
- `aws_client`       factory: `aws_client("s3")`, `aws_client("dynamodb")`
                     (DynamoDB goes to DynamoDB Local, everything else to moto)
- `local_aws`        sets AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_DYNAMODB so code
                     that builds its own boto3 clients (handlers) hits the engines
- `trino`            a `TrinoClient` on the `hive` catalog

Engines download on first use (scripts/engines/engines.py install, cached in
.engines/), are stopped at session end even when tests fail, and die with
the pytest process if it is killed. DynamoDB Local and Trino start in the
background (`dynamodb_starting`, `trino_starting`: the process now, readiness
polled in a thread) so that `local_stack` synthesizes the stack meanwhile.
State is shared by the session: tests use unique names (`unique`) rather than
resetting the engines.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "engines"))

import engines  # noqa: E402
from engines import Engine  # noqa: E402
from trino_client import TrinoClient  # noqa: E402

from tests.cloud.localcloud.fixtures import local_stack  # noqa: E402, F401  (the deployed stack, session-wide)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.cloud)


def _start(start: Callable[..., Engine], *args: Any) -> Engine:
    try:
        return start(*args)
    except engines.EngineError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def aws_credentials() -> Iterator[None]:
    """Dummy credentials and region for the whole session; no real AWS is reachable."""
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
            mp.delenv(name, raising=False)
        for name, value in engines.aws_env().items():
            mp.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def engines_installed() -> None:
    try:
        engines.install()
    except engines.EngineError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def localcloud_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """State of the moto hooks (tests/cloud/localcloud): config, Lambda code, instances, logs."""
    return tmp_path_factory.mktemp("localcloud")


@pytest.fixture(scope="session")
def moto_server(aws_credentials: None, localcloud_dir: Path) -> Iterator[Engine]:
    # moto with the local-cloud hooks (inert until localcloud_dir/config.json exists)
    engine = _start(
        lambda: engines.start_moto(
            module="tests.cloud.localcloud.motoserver",
            cwd=ROOT,
            extra_env={"IOFLEET_LOCALCLOUD_DIR": str(localcloud_dir)},
        )
    )
    try:
        yield engine
    finally:
        engine.stop()


@contextlib.contextmanager
def _launched(
    launch: Callable[[], tuple[Engine, Callable[[], None]]], name: str
) -> Iterator[Future[Engine]]:
    """An engine whose process is started now, by this (the main) thread (see
    engines.launch_trino), and whose readiness is polled in a thread; the future gives
    the engine once it answers. Stopped on exit whether or not anyone took it, and
    whether or not it finished starting."""
    try:
        engine, wait_ready = launch()
    except engines.EngineError as err:
        pytest.fail(str(err), pytrace=False)

    def ready() -> Engine:
        wait_ready()
        return engine

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-ready")
    future = pool.submit(ready)
    try:
        yield future
    finally:
        pool.shutdown(wait=True)  # readiness polling ends (ready or EngineError) first
        engine.stop()


def _ready(future: Future[Engine]) -> Engine:
    try:
        return future.result()
    except engines.EngineError as err:
        pytest.fail(str(err), pytrace=False)


# DynamoDB Local (a few seconds) and Trino (its JVM takes 30-40 s to answer queries on
# this 2-core machine) start as soon as their fixtures are asked for; `local_stack`
# asks for both first, synthesizes the stack meanwhile, and takes the engines
# (`dynamodb_local`, `trino_server`) only when it deploys.


@pytest.fixture(scope="session")
def dynamodb_starting(engines_installed: None, aws_credentials: None) -> Iterator[Future[Engine]]:
    with _launched(engines.launch_dynamodb_local, "dynamodb-local") as future:
        yield future


@pytest.fixture(scope="session")
def dynamodb_local(dynamodb_starting: Future[Engine]) -> Engine:
    return _ready(dynamodb_starting)


@pytest.fixture(scope="session")
def trino_starting(engines_installed: None, moto_server: Engine) -> Iterator[Future[Engine]]:
    # short_lived: C1 only and the serial collector (engines.SHORT_LIVED_JVM)
    launch = lambda: engines.launch_trino(moto_server.endpoint, short_lived=True)  # noqa: E731
    with _launched(launch, "trino") as future:
        yield future


@pytest.fixture(scope="session")
def trino_server(trino_starting: Future[Engine]) -> Engine:
    return _ready(trino_starting)


@pytest.fixture(scope="session")
def aws_client(moto_server: Engine, dynamodb_local: Engine) -> Callable[[str], Any]:
    """boto3 client factory: DynamoDB -> DynamoDB Local, any other service -> moto."""

    def make(service: str) -> Any:
        endpoint = dynamodb_local.endpoint if service == "dynamodb" else moto_server.endpoint
        return boto3.client(service, endpoint_url=endpoint, region_name=engines.AWS_REGION)

    return make


@pytest.fixture(scope="session")
def local_aws(moto_server: Engine, dynamodb_local: Engine) -> Iterator[dict[str, str]]:
    """Point default boto3 clients at the engines for the rest of the session."""
    endpoints = {
        "AWS_ENDPOINT_URL": moto_server.endpoint,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_local.endpoint,
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in endpoints.items():
            mp.setenv(name, value)
        yield endpoints


@pytest.fixture
def trino(trino_server: Engine) -> TrinoClient:
    return TrinoClient(trino_server.endpoint, catalog="hive")


@pytest.fixture
def unique() -> str:
    """A short suffix for resource names (engines are shared by the session)."""
    return uuid.uuid4().hex[:10]
