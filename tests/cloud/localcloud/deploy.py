"""Deploy the synthesized template into the local cloud (a stand-in for CloudFormation).

Each resource the pipeline touches is created from its own template
properties, intrinsics resolved against what was created before it:
assets (the staged Lambda and agent zips, published as cdk-assets would),
the results bucket, the state table (DynamoDB Local), the SQS queue and its
DLQ, the bucket notification, the VPC, subnets and security groups, IAM roles
and the instance profile, the launch template, the stack's own Lambda layers
(published from their asset zips), the Lambda functions (code from their asset
zips, environment from the template, the stack's layers the template gives
them; the public Powertools layer is played by the venv), the Glue database and
tables, the EventBridge rules, the state machine (definition resolved by
`infra.asl`) and, last, the views custom resource (the real views Lambda,
its Athena DDL run by Trino).
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.asl import PSEUDO, state_machine_definitions

ACCOUNT = PSEUDO["AWS::AccountId"]
REGION = PSEUDO["AWS::Region"]
AZS = [f"{REGION}a", f"{REGION}b", f"{REGION}c"]

Client = Callable[[str], Any]


def synth(outdir: Path, context: Mapping[str, object]) -> dict[str, Any]:
    """`app.build_app(context)` synthesized into `outdir`; returns the stack template."""
    from app import build_app

    # path metadata as `cdk synth` writes it (the deployer finds resources by construct path)
    app, stack = build_app(
        context={"aws:cdk:enable-path-metadata": True, **context}, outdir=str(outdir)
    )
    assembly = app.synth()
    template: dict[str, Any] = assembly.get_stack_by_name(stack.stack_name).template
    return template


class Resolver:
    """CloudFormation intrinsics over the physical ids created so far."""

    def __init__(self, resources: Mapping[str, Any]) -> None:
        self.resources = resources
        self.physical: dict[str, dict[str, str]] = {}

    def set(self, logical: str, ref: str, **attrs: str) -> None:
        self.physical[logical] = {"Ref": ref, **attrs}

    def ref(self, logical: str, attr: str | None = None) -> str:
        if logical in PSEUDO:
            return PSEUDO[logical]
        got = self.physical.get(logical)
        if got is None:
            raise KeyError(f"{logical} is not deployed (needed by a reference)")
        return got[attr or "Ref"]

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((k, v),) = value.items()
            if k == "Ref":
                return self.ref(v)
            if k == "Fn::GetAtt":
                logical, attr = v.split(".", 1) if isinstance(v, str) else v
                return self.ref(logical, attr)
            if k == "Fn::Join":
                sep, parts = v
                return sep.join(str(self(p)) for p in parts)
            if k == "Fn::Select":
                idx, items = v
                return self(items)[int(idx)]
            if k == "Fn::Split":
                sep, s = v
                return str(self(s)).split(sep)
            if k == "Fn::GetAZs":
                return list(AZS)
            if k == "Fn::Sub":
                text, names = (v, {}) if isinstance(v, str) else (v[0], self(v[1]))
                for name in sorted(_sub_names(text), key=len, reverse=True):
                    if name in names:
                        sub = str(names[name])
                    elif "." in name:
                        sub = self.ref(*name.split(".", 1))
                    else:
                        sub = self.ref(name)
                    text = text.replace("${" + name + "}", sub)
                return text
        return {k: self(v) for k, v in value.items()}


def _sub_names(text: str) -> set[str]:
    out, i = set(), 0
    while (start := text.find("${", i)) >= 0:
        end = text.find("}", start)
        if not text.startswith("${!", start):
            out.add(text[start + 2 : end])
        i = end + 1
    return out


def cdk_path(resource: Mapping[str, Any]) -> str:
    return str(resource.get("Metadata", {}).get("aws:cdk:path", ""))


FUNCTION_KINDS = {
    "Orchestration/PlanFn": "plan",
    "Orchestration/PrepareCellFn": "prepare_cell",
    "Orchestration/LaunchFn": "launch",
    "Orchestration/CleanupFn": "cleanup",
    "Orchestration/SummarizeFn": "summarize",
    "Orchestration/JanitorFn": "janitor",
    "Ingest/Ingest": "ingest",
    "Catalog/Views": "views",
}


@dataclass
class Deployment:
    template: dict[str, Any]
    client: Client
    suffix: str
    resolve: Resolver
    bucket: str = ""
    table: str = ""
    queue_url: str = ""
    queue_arn: str = ""
    dlq_url: str = ""
    functions: dict[str, str] = field(default_factory=dict)  # kind -> function name
    state_machine_arn: str = ""
    abort_rule: str = ""
    database: str = ""
    workgroup: str = ""

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    def one(self, type_: str, path_part: str = "") -> tuple[str, dict[str, Any]]:
        found = [(k, v) for k, v in self.resources(type_).items() if path_part in cdk_path(v)]
        assert len(found) == 1, (type_, path_part, [k for k, _ in found])
        return found[0]

    # ------------------------------------------------------------------ use

    def invoke(self, kind: str, event: Any) -> tuple[Any, str | None]:
        """Invoke a function through moto's Lambda API; (payload, FunctionError)."""
        out = self.client("lambda").invoke(
            FunctionName=self.functions[kind], Payload=json.dumps(event).encode()
        )
        return json.loads(out["Payload"].read() or b"null"), out.get("FunctionError")

    def queue_depth(self) -> int:
        attrs = self.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(
            attrs["ApproximateNumberOfMessagesNotVisible"]
        )

    def execution_status_event(
        self, execution_arn: str, status: str, cause: str = ""
    ) -> dict[str, Any]:
        """The event Step Functions sends to EventBridge on an execution status change."""
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "account": ACCOUNT,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION,
            "resources": [execution_arn],
            "detail": {
                "executionArn": execution_arn,
                "stateMachineArn": self.state_machine_arn,
                "status": status,
                "cause": cause or None,
                "error": None,
            },
        }

    def deliver_event(self, event: dict[str, Any]) -> list[Any]:
        """EventBridge delivery (moto does not deliver to Lambda targets): moto's
        TestEventPattern matches the abort rule's pattern, then its targets are invoked."""
        # moto's own pattern matcher: moto server answers TestEventPattern with nothing
        from moto.events.models import EventPattern

        events = self.client("events")
        rule = events.describe_rule(Name=self.abort_rule)
        if not EventPattern.load(rule["EventPattern"]).matches_event(event):
            return []
        out = []
        by_arn = {
            self.client("lambda").get_function(FunctionName=n)["Configuration"]["FunctionArn"]: n
            for n in self.functions.values()
        }
        for target in events.list_targets_by_rule(Rule=self.abort_rule)["Targets"]:
            kind = next(k for k, n in self.functions.items() if n == by_arn[target["Arn"]])
            out.append(self.invoke(kind, event))
        return out


class EventSourceMapping:
    """The SQS event source mapping of the ingest function, as pollers in threads.

    Each poller receives up to `batch_size` messages, invokes the function
    through moto's Lambda API with the SQS event, and deletes the messages the
    partial-batch response does not name (those come back after the queue's
    visibility timeout, then go to the DLQ after maxReceiveCount).
    """

    def __init__(self, d: Deployment, *, batch_size: int, pollers: int = 4) -> None:
        self.d = d
        self.batch_size = batch_size
        self.stop_event = threading.Event()
        self.threads = [
            threading.Thread(target=self._poll, daemon=True, name=f"esm-{i}")
            for i in range(pollers)
        ]
        self.stats = {"batches": 0, "messages": 0, "failed": 0, "errors": 0}
        self.lock = threading.Lock()

    def start(self) -> EventSourceMapping:
        for t in self.threads:
            t.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=30)

    def _poll(self) -> None:
        sqs = self.d.client("sqs")
        while not self.stop_event.is_set():
            try:
                got = sqs.receive_message(
                    QueueUrl=self.d.queue_url,
                    MaxNumberOfMessages=self.batch_size,
                    WaitTimeSeconds=1,
                    AttributeNames=["All"],
                ).get("Messages", [])
                if got:
                    self._deliver(sqs, got)
            except Exception:  # noqa: BLE001 - a poller keeps polling, as the managed one does
                with self.lock:
                    self.stats["errors"] += 1
                self.stop_event.wait(0.5)

    def _deliver(self, sqs: Any, messages: list[dict[str, Any]]) -> None:
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": self.d.queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
        answer, error = self.d.invoke("ingest", {"Records": records})
        failed = (
            {m["MessageId"] for m in messages}
            if error
            else {f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])}
        )
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=self.d.queue_url,
                Entries=[
                    {"Id": str(j), "ReceiptHandle": m["ReceiptHandle"]} for j, m in enumerate(done)
                ],
            )
        with self.lock:
            self.stats["batches"] += 1
            self.stats["messages"] += len(messages)
            self.stats["failed"] += len(failed)

    def wait_drained(self, timeout_s: float = 300.0) -> None:
        """Until the queue holds nothing visible or in flight (bounded polling)."""
        deadline = time.monotonic() + timeout_s
        interval = 0.2
        while self.d.queue_depth() > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"ingest queue not drained after {timeout_s:.0f} s ({self.stats})"
                )
            time.sleep(interval)  # polling interval, not synchronisation
            interval = min(interval * 1.5, 0.5)


def _zip_dir(path: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(path.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                zf.write(f, f.relative_to(path).as_posix())
    return buf.getvalue()


def deploy(
    template: dict[str, Any],
    outdir: Path,
    *,
    client: Client,
    stack_name: str,
    cfn_response_url: Callable[[str], str],
    cfn_responses: Mapping[str, Any],
) -> Deployment:
    suffix = uuid.uuid4().hex[:8]
    resolve = Resolver(template["Resources"])
    d = Deployment(template=template, client=client, suffix=suffix, resolve=resolve)
    _assets(d, outdir, stack_name)
    _storage(d)
    _queues(d)
    _network(d)
    _iam(d)
    _functions(d)
    _catalog(d)
    _orchestration(d)
    _views(d, cfn_response_url, cfn_responses)
    return d


def _assets(d: Deployment, outdir: Path, stack_name: str) -> None:
    manifest = json.loads((outdir / f"{stack_name}.assets.json").read_text())
    s3 = d.client("s3")
    for asset in manifest["files"].values():
        source = outdir / asset["source"]["path"]
        for dest in asset["destinations"].values():
            bucket = d.resolve({"Fn::Sub": dest["bucketName"].replace("${AWS::Partition}", "aws")})
            if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                s3.create_bucket(Bucket=bucket)
            if asset["source"].get("packaging") == "zip":
                body = _zip_dir(source)
            else:
                body = source.read_bytes()
            s3.put_object(Bucket=bucket, Key=dest["objectKey"], Body=body)


def _storage(d: Deployment) -> None:
    logical, _ = d.one("AWS::S3::Bucket", "Storage/Results")
    d.bucket = f"iofleet-results-{d.suffix}"
    d.client("s3").create_bucket(Bucket=d.bucket)
    d.resolve.set(logical, d.bucket, Arn=f"arn:aws:s3:::{d.bucket}")

    logical, res = d.one("AWS::DynamoDB::GlobalTable", "Storage/State")
    props = d.resolve(res["Properties"])
    d.table = f"iofleet-state-{d.suffix}"
    args: dict[str, Any] = {
        "TableName": d.table,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
    }
    if props.get("GlobalSecondaryIndexes"):
        args["GlobalSecondaryIndexes"] = [
            {k: v for k, v in g.items() if k in ("IndexName", "KeySchema", "Projection")}
            for g in props["GlobalSecondaryIndexes"]
        ]
    ddb = d.client("dynamodb")
    ddb.create_table(**args)
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        ddb.update_time_to_live(TableName=d.table, TimeToLiveSpecification=ttl)
    d.resolve.set(logical, d.table, Arn=f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{d.table}")


def _queue_attributes(props: Mapping[str, Any]) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for name in (
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "DelaySeconds",
        "ReceiveMessageWaitTimeSeconds",
    ):
        if name in props:
            attrs[name] = str(props[name])
    if "RedrivePolicy" in props:
        attrs["RedrivePolicy"] = json.dumps(props["RedrivePolicy"])
    return attrs


def _queues(d: Deployment) -> None:
    sqs = d.client("sqs")
    for path, attr in (("Ingest/DeadLetters", "dlq_url"), ("Ingest/RawObjects", "queue_url")):
        logical, res = d.one("AWS::SQS::Queue", path)
        name = f"iofleet-{path.split('/')[-1].lower()}-{d.suffix}"
        url = sqs.create_queue(
            QueueName=name, Attributes=_queue_attributes(d.resolve(res["Properties"]))
        )["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        setattr(d, attr, url)
        d.resolve.set(logical, url, Arn=arn, QueueName=name)
        if attr == "queue_url":
            d.queue_arn = arn
    _, res = d.one("Custom::S3BucketNotifications")
    props = res[
        "Properties"
    ]  # its ServiceToken (CDK's notification handler) is what this step plays
    d.client("s3").put_bucket_notification_configuration(
        Bucket=d.resolve(props["BucketName"]),
        NotificationConfiguration=d.resolve(props["NotificationConfiguration"]),
    )


def _network(d: Deployment) -> None:
    ec2 = d.client("ec2")
    logical, res = d.one("AWS::EC2::VPC")
    vpc = ec2.create_vpc(CidrBlock=res["Properties"]["CidrBlock"])["Vpc"]["VpcId"]
    d.resolve.set(logical, vpc)
    for logical, res in d.resources("AWS::EC2::Subnet").items():
        props = d.resolve(res["Properties"])
        subnet = ec2.create_subnet(
            VpcId=props["VpcId"],
            CidrBlock=props["CidrBlock"],
            AvailabilityZone=props["AvailabilityZone"],
        )
        d.resolve.set(logical, subnet["Subnet"]["SubnetId"])
    for logical, res in d.resources("AWS::EC2::SecurityGroup").items():
        props = d.resolve(res["Properties"])
        sg = ec2.create_security_group(
            GroupName=f"{logical}-{d.suffix}",
            Description=props["GroupDescription"],
            VpcId=props["VpcId"],
        )
        d.resolve.set(logical, sg["GroupId"], GroupId=sg["GroupId"])


def _iam(d: Deployment) -> None:
    iam = d.client("iam")
    for logical, res in d.resources("AWS::IAM::Role").items():
        name = f"{logical[:50]}-{d.suffix}"
        role = iam.create_role(
            RoleName=name,
            AssumeRolePolicyDocument=json.dumps(res["Properties"]["AssumeRolePolicyDocument"]),
        )
        d.resolve.set(logical, name, Arn=role["Role"]["Arn"], RoleId=role["Role"]["RoleId"])
    for logical, res in d.resources("AWS::IAM::InstanceProfile").items():
        name = f"{logical[:50]}-{d.suffix}"
        profile = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        for role in d.resolve(res["Properties"]["Roles"]):
            iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
        d.resolve.set(logical, name, Arn=profile["Arn"])
    logical, res = d.one("AWS::EC2::LaunchTemplate")
    data = d.resolve(res["Properties"]["LaunchTemplateData"])
    lt = d.client("ec2").create_launch_template(
        LaunchTemplateName=f"iofleet-{d.suffix}", LaunchTemplateData=data
    )
    lt_id = lt["LaunchTemplate"]["LaunchTemplateId"]
    d.resolve.set(
        logical, lt_id, LatestVersionNumber=str(lt["LaunchTemplate"]["LatestVersionNumber"])
    )


def _layers(d: Deployment) -> None:
    """The stack's LayerVersions (the stats layer) published from their asset zips.
    A worker runs this machine's Python, not the layer's cp314 binaries: what a layer
    changes here is what a function may import (lambda_runtime: LAYER_MODULES)."""
    lam = d.client("lambda")
    for logical, res in d.resources("AWS::Lambda::LayerVersion").items():
        props = d.resolve(res["Properties"])
        out = lam.publish_layer_version(
            LayerName=f"iofleet-{logical}-{d.suffix}",
            Content={"S3Bucket": props["Content"]["S3Bucket"], "S3Key": props["Content"]["S3Key"]},
            CompatibleRuntimes=props.get("CompatibleRuntimes", []),
        )
        d.resolve.set(logical, out["LayerVersionArn"])


def _functions(d: Deployment) -> None:
    lam = d.client("lambda")
    _layers(d)
    own_layers = set(d.resources("AWS::Lambda::LayerVersion"))
    for logical, res in d.resources("AWS::Lambda::Function").items():
        path = cdk_path(res)
        kind = next((k for p, k in FUNCTION_KINDS.items() if p in path), None)
        if kind is None:  # CDK's own bucket-notification handler: played by _queues
            continue
        wanted = ("Runtime", "Role", "Handler", "Code", "Environment", "Timeout", "MemorySize")
        props = d.resolve({k: v for k, v in res["Properties"].items() if k in wanted})
        name = f"iofleet-{kind}-{d.suffix}"
        layers = [
            d.resolve(layer)
            for layer in res["Properties"].get("Layers", [])
            if isinstance(layer, dict) and layer.get("Ref") in own_layers
        ]
        fn = lam.create_function(
            FunctionName=name,
            Runtime=props["Runtime"],
            Role=props["Role"],
            Handler=props["Handler"],
            Code={"S3Bucket": props["Code"]["S3Bucket"], "S3Key": props["Code"]["S3Key"]},
            Environment=props.get("Environment", {"Variables": {}}),
            Timeout=int(props.get("Timeout", 3)),
            MemorySize=int(props.get("MemorySize", 128)),
            Layers=layers,
        )
        d.functions[kind] = name
        d.resolve.set(logical, name, Arn=fn["FunctionArn"])


def _catalog(d: Deployment) -> None:
    glue = d.client("glue")
    logical, res = d.one("AWS::Glue::Database")
    db = d.resolve(res["Properties"])["DatabaseInput"]
    d.database = db["Name"]
    try:
        glue.delete_database(Name=d.database)  # a previous deployment in this moto session
    except glue.exceptions.EntityNotFoundException:
        pass
    glue.create_database(DatabaseInput=db)
    d.resolve.set(logical, d.database)
    for logical, res in d.resources("AWS::Glue::Table").items():
        props = d.resolve(res["Properties"])
        glue.create_table(DatabaseName=props["DatabaseName"], TableInput=props["TableInput"])
        d.resolve.set(logical, props["TableInput"]["Name"])
    logical, res = d.one("AWS::Athena::WorkGroup")
    d.workgroup = res["Properties"]["Name"]
    d.resolve.set(logical, d.workgroup)


def _orchestration(d: Deployment) -> None:
    logical, res = d.one("AWS::StepFunctions::StateMachine")
    arns = {k: v["Arn"] if "Arn" in v else v["Ref"] for k, v in d.resolve.physical.items()}
    arns.update(
        {
            k: v["Ref"]
            for k, v in d.resolve.physical.items()
            if k in d.resources("AWS::DynamoDB::GlobalTable")
        }
    )
    definition = state_machine_definitions(d.template, arns)[logical]
    props = d.resolve({"RoleArn": res["Properties"]["RoleArn"]})
    sm = d.client("stepfunctions").create_state_machine(
        name=f"iofleet-{d.suffix}",
        definition=json.dumps(definition),
        roleArn=props["RoleArn"],
        type="STANDARD",
    )
    d.state_machine_arn = sm["stateMachineArn"]
    d.resolve.set(logical, d.state_machine_arn, Name=f"iofleet-{d.suffix}")
    events = d.client("events")
    for logical, res in d.resources("AWS::Events::Rule").items():
        props = d.resolve(res["Properties"])
        name = f"{logical[:40]}-{d.suffix}"
        args: dict[str, Any] = {
            "Name": name,
            "State": props.get("State", "ENABLED"),
            "Description": props.get("Description", ""),
        }
        if "EventPattern" in props:
            args["EventPattern"] = json.dumps(props["EventPattern"])
        else:
            args["ScheduleExpression"] = props["ScheduleExpression"]
        events.put_rule(**args)
        events.put_targets(
            Rule=name, Targets=[{"Id": t["Id"], "Arn": t["Arn"]} for t in props["Targets"]]
        )
        if "AbortRule" in logical:
            d.abort_rule = name


def _views(d: Deployment, response_url: Callable[[str], str], responses: Mapping[str, Any]) -> None:
    logical, res = d.one("Custom::IofleetViews")
    request_id = str(uuid.uuid4())
    event = {
        "RequestType": "Create",
        "ServiceToken": d.resolve(res["Properties"]["ServiceToken"]),
        "ResponseURL": response_url(request_id),
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/IofleetStack/{d.suffix}",
        "RequestId": request_id,
        "LogicalResourceId": logical,
        "ResourceType": res["Type"],
        "ResourceProperties": d.resolve(res["Properties"]),
    }
    answer, error = d.invoke("views", event)
    got = responses.get(request_id)
    if error or not got or got.get("Status") != "SUCCESS":
        raise RuntimeError(f"views custom resource failed: {error or ''} {got or answer}")
