"""The local cloud: the synthesized stack deployed into moto + DynamoDB Local + Trino.

What is real here: the CloudFormation template (synthesized by `app.build_app`),
the state-machine definition (resolved by `infra.asl`), the Lambda handlers
from their staged asset zips, the instance agent from its asset zip (real fio,
ioping and apps on temp dirs), S3 -> SQS notifications, DynamoDB (DynamoDB
Local), Glue + S3 read by Trino 476 (Athena's engine family).

Hand-written substitutes (each because no local engine does the job):

- `deploy.py` plays CloudFormation: it creates each resource the tests need
  from its template properties (intrinsics resolved) with the service APIs.
- `hooks.py` runs inside the moto server process (`motoserver.py`):
  * Lambda `Invoke` runs the function's real handler from its code zip in a
    warm worker process (`lambda_runtime.py`), with the function's
    environment from moto plus endpoint variables (moto runs no Lambda code
    without Docker). X-Ray tracing is disabled (no daemon).
  * EC2 `RunInstances` starts a local "instance": the agent command from the
    user-data marker line, with the agent bundle downloaded from the asset
    bucket the user-data names, run by the venv's python (the distro python3
    here has no boto3) in a private mount namespace where a `mount` shim turns
    the EFS NFS mount into a bind mount of a temp dir (one per file system id).
    There is no IMDS, so manifests carry no instance id. When the agent
    exits, the instance is terminated (the user-data's poweroff with
    instance-initiated shutdown = terminate); TerminateInstances kills a
    running agent's process group.
- `athena.py`: the Athena API (Start/GetQueryExecution, GetQueryResults) over
  Trino, so Summarize and the views custom resource run their SQL for real
  (moto's Athena runs no SQL), plus a sink for CloudFormation responses.
- `ingest_queue()` in `deploy.py` is the SQS event source mapping: it receives
  batches of 10 and invokes the ingest function through moto's Lambda API,
  deleting what the partial-batch response does not report as failed.
- EventBridge: moto's Step Functions emits no execution status events, so
  tests deliver the event the abort rule matches to its target themselves.
- `ec2_faults.py` (installed by the hooks, off unless a test sets
  `ec2_faults`): moto's RunInstances answers RequestLimitExceeded,
  InsufficientInstanceCapacity or Unsupported as the rules say, the EC2 API's
  own failures at fleet scale that moto never shows; and EC2's ClientToken
  idempotency (a repeated token gets the earlier instances back), always on.
- `s3express.py` (installed by the hooks): S3 Express One Zone directory
  buckets, which moto lacks: CreateBucket with a Directory configuration,
  ListDirectoryBuckets, CreateSession and its session checks, the zonal
  endpoint, the documented naming and zone rules; the objects live in a plain
  moto bucket of another moto account. The Lambdas' boto3 code reaches it
  unchanged through `AWS_ENDPOINT_URL`.
- `sfn_patches.py` fixes two places where moto's Step Functions interpreter
  departs from AWS: a Distributed Map's tolerated failure threshold, and
  StopExecution (ABORTED at once and for good).
"""
