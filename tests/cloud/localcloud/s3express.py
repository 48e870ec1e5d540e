"""S3 Express One Zone directory buckets in front of moto's S3 (moto 5.2.5 has none).

A hand-written stand-in, installed in the moto server process by `hooks.install()` as a
WSGI layer over moto's dispatcher, for exactly what moto lacks:

- CreateBucket with a `Bucket: {Type: Directory}` configuration (moto refuses it),
  DeleteBucket and ListDirectoryBuckets (moto has no such operation) on directory
  buckets: the regional control endpoint `s3express-control.<region>.amazonaws.com`;
- CreateSession (`GET /<bucket>?session`) and the session it hands out: every
  zonal-endpoint call on a directory bucket must carry `x-amz-s3session-token` of an
  unexpired session of that bucket (ReadOnly sessions may only read), as on AWS;
- the zonal endpoint `<bucket>.s3express-<az-id>.<region>.amazonaws.com` (virtual-host
  style; another zone's endpoint does not know the bucket) and the path style botocore
  uses when the endpoint is overridden with an IP address (`AWS_ENDPOINT_URL`, the
  local cloud's case: `http://127.0.0.1:PORT/<bucket>...`).

What botocore sends, unchanged: any bucket named `...--x-s3` goes to the S3 Express
endpoint rules (signing name `s3express`); with an endpoint override every call on such a
bucket, CreateBucket and DeleteBucket included, is signed with a session (AWS's control
endpoint takes plain SigV4 for those two), so CreateSession is answered for a well-formed
name in a zone of the region even before the bucket exists; the calls that follow answer
NoSuchBucket as on AWS when it does not.

The objects: a directory bucket is kept as a general purpose moto bucket `sx-<hash>` in a
separate moto account (`BACKING_ACCOUNT`, via moto's `x-moto-account-id`), so the
stack's account never sees it in ListBuckets (as on AWS); every zonal call is passed to
moto's S3 with the bucket renamed, and the backing name is renamed back in the answer.

Directory-bucket rules checked (AWS S3 User Guide, "Directory bucket naming rules" and
CreateBucket): name `base--<az-id>--x-s3`, 3-63 characters, lower-case letters, digits
and hyphens, beginning and ending with a letter or digit, not starting with `xn--`,
`sthree-` or `amzn-s3-demo-`; the configuration's Location `{Type: AvailabilityZone,
Name: <az-id>}` names the zone in the name, and that zone is one of the region's (moto's
EC2 zones, the ones the stack's subnets are in); `DataRedundancy` SingleAvailabilityZone;
unique names (BucketAlreadyOwnedByYou); DeleteBucket only when empty (BucketNotEmpty,
from moto's S3 on the backing bucket).

Not modelled (AWS only): the zone's latency and throughput, the S3 Express IAM actions
(`s3express:CreateSession` grants), the listing rules of directory buckets (prefixes
ending in the delimiter, no ordering), the Express-only availability of some zones,
and one registry for the whole server (moto's default account).

Every call handled here is appended to `$IOFLEET_LOCALCLOUD_DIR/s3express.jsonl`
({"op", "bucket", "status", "caller", "session", "signing_name"}; `caller` is the IAM
access key that signed the call or created the session it used) so a test can see who
created a session and which calls reached which bucket.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import re
import secrets
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, quote, unquote

BACKING_ACCOUNT = "000000053000"  # moto account holding the directory buckets' objects
SESSION_S = 300  # "Temporary credentials ... expire after 5 minutes" (CreateSession)
LOG = "s3express.jsonl"
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
SUFFIX = "--x-s3"
_NAME = re.compile(r"^(?P<base>[a-z0-9][a-z0-9-]*?)--(?P<az>[a-z0-9]+-az[0-9]+)--x-s3$")
_VALID_CHARS = re.compile(r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")
_ZONAL_HOST = re.compile(
    r"^(?P<bucket>[a-z0-9-]+--x-s3)\.s3express-(?P<az>[a-z0-9-]+)\.(?P<region>[a-z0-9-]+)"
    r"\.amazonaws\.com(?::[0-9]+)?$"
)
_CONTROL_HOST = re.compile(r"^s3express-control\.[a-z0-9-]+\.amazonaws\.com(?::[0-9]+)?$")
_WRITES = {"PUT", "POST", "DELETE"}


def backing_name(name: str) -> str:
    """The general purpose moto bucket holding directory bucket `name`'s objects."""
    return "sx-" + hashlib.sha256(name.encode()).hexdigest()[:32]


def region_zones(region: str) -> dict[str, str]:
    """AZ ID -> AZ name of the region, as moto's EC2 describes them."""
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    return {z.zone_id: z.name for z in RegionsAndZonesBackend.zones.get(region, [])}


class S3Error(Exception):
    def __init__(self, status: int, code: str, message: str, bucket: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.bucket = status, code, message, bucket


def name_error(name: str) -> str | None:
    """Why `name` is not a valid directory bucket name, or None."""
    if not 3 <= len(name) <= 63:
        return "must be 3 to 63 characters long, the suffix included"
    if not _VALID_CHARS.match(name):
        return "only lower-case letters, digits and hyphens, beginning and ending with a letter or digit"
    if name.startswith(("xn--", "sthree-", "amzn-s3-demo-")):
        return "must not start with xn--, sthree- or amzn-s3-demo-"
    if not _NAME.match(name):
        return "must end in --<az-id>--x-s3"
    return None


class DirectoryBuckets:
    """The stand-in's state (one per moto server) and its WSGI layer."""

    def __init__(self, log_dir: Callable[[], str | None] = lambda: None) -> None:
        self.lock = threading.Lock()
        self.buckets: dict[str, dict[str, str]] = {}  # name -> az_id, region, created
        self.sessions: dict[str, dict[str, Any]] = {}  # token -> bucket, mode, expires
        self.log_dir = log_dir

    # ------------------------------------------------------------------ WSGI

    def wrap(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def wsgi(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            call = self.classify(environ)
            if call is None:
                return app(environ, start_response)
            try:
                return self.handle(call, environ, start_response, app)
            except S3Error as err:
                self._log(call, err.status, environ)
                return _error(start_response, err)

        return wsgi

    def classify(self, environ: dict[str, Any]) -> dict[str, Any] | None:
        """The directory-bucket call this request is, or None (stock moto's)."""
        host = str(environ.get("HTTP_HOST", ""))
        path = unquote(str(environ.get("PATH_INFO", "")))
        scope = _scope(environ)
        zonal = _ZONAL_HOST.match(host)
        if zonal:
            return {"bucket": zonal["bucket"], "key_path": path, "zone": zonal["az"], "host": True}
        first, _, rest = path.lstrip("/").partition("/")
        if first.endswith(SUFFIX):
            return {"bucket": first, "key_path": "/" + rest if rest or path.endswith("/") else ""}
        if first == "" and ((scope and scope[1] == "s3express") or _CONTROL_HOST.match(host)):
            return {"bucket": "", "key_path": ""}
        return None

    def handle(
        self, call: dict[str, Any], environ: dict[str, Any], start_response: Any, app: Any
    ) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
        bucket, key_path = call["bucket"], call["key_path"]
        call["op"] = _operation(method, bucket, key_path, query)
        region = (_scope(environ) or ("us-east-1", ""))[0]
        if not bucket:
            if method != "GET":
                raise S3Error(405, "MethodNotAllowed", "The specified method is not allowed")
            self._log(call, 200, environ)
            return _xml(start_response, 200, self._list(query))
        known = self.buckets.get(bucket)
        if call.get("zone") and known and known["az_id"] != call["zone"]:
            raise S3Error(404, "NoSuchBucket", "The specified bucket does not exist", bucket)
        if call["op"] == "CreateSession":
            self._check_zone_name(bucket, region)
            body = self._session(bucket, environ)
            self._log(call, 200, environ)
            return _xml(start_response, 200, body)
        if call["op"] == "CreateBucket":
            self._create_checks(bucket, region, environ)
        elif call["op"] not in ("DeleteBucket", "HeadBucket"):
            self._authorize(bucket, method, environ)
        status, headers, body = self._forward(call, environ, app, region)
        if call["op"] == "CreateBucket" and status < 300:
            with self.lock:
                self.buckets[bucket] = {
                    "az_id": _NAME.match(bucket)["az"],  # type: ignore[index]
                    "region": region,
                    "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                }
        if call["op"] == "DeleteBucket" and status < 300:
            with self.lock:
                self.buckets.pop(bucket, None)  # its sessions run out; calls get NoSuchBucket
        self._log(call, status, environ)
        start_response(_status_line(status), headers)
        return [body]

    # ------------------------------------------------------------------ operations

    def _list(self, query: dict[str, list[str]]) -> bytes:
        limit = int((query.get("max-directory-buckets") or ["1000"])[0])
        after = (query.get("continuation-token") or [""])[0]
        with self.lock:
            names = sorted(n for n in self.buckets if n > after)
            page, more = names[:limit], len(names) > limit
            rows = [(n, self.buckets[n]) for n in page]
        root = ET.Element("ListAllMyDirectoryBucketsResult", xmlns=S3_NS)
        buckets = ET.SubElement(root, "Buckets")
        for name, info in rows:
            b = ET.SubElement(buckets, "Bucket")
            ET.SubElement(b, "Name").text = name
            ET.SubElement(b, "CreationDate").text = info["created"]
            ET.SubElement(b, "BucketRegion").text = info["region"]
        if more:
            ET.SubElement(root, "ContinuationToken").text = page[-1]
        return ET.tostring(root, xml_declaration=True, encoding="UTF-8")

    def _check_zone_name(self, bucket: str, region: str) -> str:
        problem = name_error(bucket)
        if problem:
            raise S3Error(
                400, "InvalidBucketName", f"The specified bucket is not valid: {problem}", bucket
            )
        az_id = _NAME.match(bucket)["az"]  # type: ignore[index]
        if az_id not in region_zones(region):
            raise S3Error(
                400,
                "InvalidBucketName",
                f"The specified bucket is not valid: {az_id} is not an Availability Zone of {region}",
                bucket,
            )
        return str(az_id)

    def _session(self, bucket: str, environ: dict[str, Any]) -> bytes:
        mode = str(environ.get("HTTP_X_AMZ_CREATE_SESSION_MODE") or "ReadWrite")
        if mode not in ("ReadWrite", "ReadOnly"):
            raise S3Error(400, "InvalidArgument", f"Invalid session mode {mode!r}", bucket)
        token = secrets.token_urlsafe(48)
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=SESSION_S)
        with self.lock:
            now = dt.datetime.now(dt.UTC)
            for t in [t for t, s in self.sessions.items() if s["expires"] <= now]:
                del self.sessions[t]
            self.sessions[token] = {
                "bucket": bucket,
                "mode": mode,
                "expires": expires,
                "caller": _access_key(environ),
            }
        root = ET.Element("CreateSessionResult", xmlns=S3_NS)
        creds = ET.SubElement(root, "Credentials")
        ET.SubElement(creds, "SessionToken").text = token
        ET.SubElement(creds, "SecretAccessKey").text = secrets.token_urlsafe(30)
        ET.SubElement(creds, "AccessKeyId").text = "ASIA" + secrets.token_hex(8).upper()
        ET.SubElement(creds, "Expiration").text = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
        return ET.tostring(root, xml_declaration=True, encoding="UTF-8")

    def _authorize(self, bucket: str, method: str, environ: dict[str, Any]) -> None:
        token = environ.get("HTTP_X_AMZ_S3SESSION_TOKEN")
        with self.lock:
            session = self.sessions.get(str(token)) if token else None
        if session is None:
            raise S3Error(403, "AccessDenied", "Access Denied: no S3 Express session token", bucket)
        if session["expires"] <= dt.datetime.now(dt.UTC):
            raise S3Error(400, "ExpiredToken", "The provided token has expired.", bucket)
        if session["bucket"] != bucket:
            raise S3Error(
                403, "AccessDenied", "Access Denied: the session is for another bucket", bucket
            )
        if session["mode"] == "ReadOnly" and method in _WRITES:
            raise S3Error(403, "AccessDenied", "Access Denied: a ReadOnly session", bucket)

    def _create_checks(self, bucket: str, region: str, environ: dict[str, Any]) -> None:
        az_id = self._check_zone_name(bucket, region)
        body = _read_body(environ)
        try:
            doc = ET.fromstring(body) if body.strip() else None
        except ET.ParseError as exc:
            raise S3Error(
                400, "MalformedXML", f"The XML you provided was not well-formed: {exc}"
            ) from None
        if doc is None:
            raise S3Error(
                400, "InvalidArgument", "a directory bucket needs CreateBucketConfiguration", bucket
            )

        def text(path: str) -> str:
            node: ET.Element | None = doc
            for part in path.split("/"):
                node = next((c for c in node if c.tag.rsplit("}", 1)[-1] == part), None)
                if node is None:
                    return ""
            return (node.text or "").strip()

        if text("Bucket/Type") != "Directory":
            raise S3Error(400, "InvalidArgument", "Bucket Type must be Directory", bucket)
        if text("Location/Type") != "AvailabilityZone":
            raise S3Error(400, "InvalidArgument", "Location Type must be AvailabilityZone", bucket)
        if text("Location/Name") != az_id:
            raise S3Error(
                400,
                "InvalidBucketName",
                f"The specified bucket is not valid: its suffix names {az_id}, "
                f"the location {text('Location/Name') or 'none'}",
                bucket,
            )
        if text("Bucket/DataRedundancy") != "SingleAvailabilityZone":
            raise S3Error(
                400, "InvalidArgument", "DataRedundancy must be SingleAvailabilityZone", bucket
            )
        if text("LocationConstraint"):
            raise S3Error(
                400, "InvalidArgument", "LocationConstraint is not for directory buckets", bucket
            )
        with self.lock:
            if bucket in self.buckets:
                raise S3Error(
                    409,
                    "BucketAlreadyOwnedByYou",
                    "Your previous request to create the named bucket succeeded and you already own it.",
                    bucket,
                )

    # ------------------------------------------------------------------ forward to moto

    def _forward(
        self, call: dict[str, Any], environ: dict[str, Any], app: Any, region: str
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        bucket = call["bucket"]
        backing = backing_name(bucket)
        env = dict(environ)
        new_path = f"/{backing}{call['key_path']}"
        raw_path = f"/{backing}" + _raw_key_path(environ, bucket, call.get("host", False))
        query = str(environ.get("QUERY_STRING", ""))
        env["PATH_INFO"] = new_path
        env["RAW_URI"] = env["REQUEST_URI"] = raw_path + (f"?{query}" if query else "")
        env["HTTP_HOST"] = "s3.amazonaws.com"
        env["HTTP_X_MOTO_ACCOUNT_ID"] = BACKING_ACCOUNT
        env.pop("HTTP_X_AMZ_S3SESSION_TOKEN", None)
        auth = str(env.get("HTTP_AUTHORIZATION", ""))
        env["HTTP_AUTHORIZATION"] = auth.replace("/s3express/aws4_request", "/s3/aws4_request")
        if call["op"] == "CreateBucket":
            body = (
                b""
                if region == "us-east-1"
                else (
                    f'<CreateBucketConfiguration xmlns="{S3_NS}"><LocationConstraint>'
                    f"{region}</LocationConstraint></CreateBucketConfiguration>"
                ).encode()
            )
            env["wsgi.input"] = io.BytesIO(body)
            env["CONTENT_LENGTH"] = str(len(body))
        captured: dict[str, Any] = {}

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        chunks = app(env, start)
        try:
            raw = b"".join(chunks)
        finally:
            close = getattr(chunks, "close", None)
            if close:
                close()
        old, new = backing.encode(), bucket.encode()
        body_out = raw.replace(old, new) if call["op"] != "GetObject" else raw
        headers = [
            (k, v.replace(backing, bucket))
            for k, v in captured["headers"]
            if k.lower() != "content-length"
        ]
        if environ["REQUEST_METHOD"] != "HEAD":
            headers.append(("Content-Length", str(len(body_out))))
        else:
            headers += [(k, v) for k, v in captured["headers"] if k.lower() == "content-length"]
        return int(captured["status"].split()[0]), headers, body_out

    def _log(self, call: dict[str, Any], status: int, environ: dict[str, Any]) -> None:
        directory = self.log_dir()
        if not directory:
            return
        scope = _scope(environ)
        token = environ.get("HTTP_X_AMZ_S3SESSION_TOKEN")
        with self.lock:
            session = self.sessions.get(str(token)) if token else None
        line = {
            "op": call.get("op", "?"),
            "bucket": call.get("bucket", ""),
            "status": status,
            # who signed: the IAM access key, or the one that created the session used
            "caller": session["caller"] if session else _access_key(environ),
            "session": session is not None,
            "signing_name": scope[1] if scope else "",
        }
        with self.lock, open(os.path.join(directory, LOG), "a") as out:
            out.write(json.dumps(line) + "\n")


# --------------------------------------------------------------------------- helpers


def _scope(environ: dict[str, Any]) -> tuple[str, str] | None:
    """(region, signing name) of a SigV4 Authorization header."""
    auth = str(environ.get("HTTP_AUTHORIZATION", ""))
    m = re.search(r"Credential=[^/]+/[0-9]{8}/([^/]+)/([^/]+)/aws4_request", auth)
    return (m[1], m[2]) if m else None


def _access_key(environ: dict[str, Any]) -> str:
    m = re.search(r"Credential=([^/]+)/", str(environ.get("HTTP_AUTHORIZATION", "")))
    return m[1] if m else ""


def _raw_key_path(environ: dict[str, Any], bucket: str, host_style: bool) -> str:
    """The request's path after the bucket, as it arrived (still percent-encoded)."""
    raw = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", ""))
    raw = raw.split("?", 1)[0]
    if "://" in raw:
        raw = "/" + raw.split("://", 1)[1].partition("/")[2]
    if host_style:
        return raw
    for prefix in (f"/{bucket}", f"/{quote(bucket)}"):
        if raw.startswith(prefix):
            return raw[len(prefix) :]
    return raw


def _read_body(environ: dict[str, Any]) -> bytes:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body: bytes = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _operation(method: str, bucket: str, key_path: str, query: dict[str, list[str]]) -> str:
    if not bucket:
        return "ListDirectoryBuckets"
    if key_path in ("", "/"):
        if "session" in query:
            return "CreateSession"
        if not query:
            return {"PUT": "CreateBucket", "DELETE": "DeleteBucket", "HEAD": "HeadBucket"}.get(
                method, "ListObjects" if method == "GET" else method
            )
        if "list-type" in query:
            return "ListObjectsV2"
        if "delete" in query:
            return "DeleteObjects"
        if "uploads" in query:
            return "ListMultipartUploads"
        return f"{method} ?{'&'.join(sorted(query))}"
    name = {"GET": "GetObject", "PUT": "PutObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}
    if "uploads" in query:
        return "CreateMultipartUpload"
    if "uploadId" in query:
        return {"PUT": "UploadPart", "POST": "CompleteMultipartUpload"}.get(
            method, "MultipartUpload"
        )
    return name.get(method, method)


def _status_line(status: int) -> str:
    from http import HTTPStatus

    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _xml(start_response: Any, status: int, body: bytes) -> list[bytes]:
    start_response(
        _status_line(status),
        [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _error(start_response: Any, err: S3Error) -> list[bytes]:
    root = ET.Element("Error")
    ET.SubElement(root, "Code").text = err.code
    ET.SubElement(root, "Message").text = err.message
    if err.bucket:
        ET.SubElement(root, "BucketName").text = err.bucket
    ET.SubElement(root, "RequestId").text = secrets.token_hex(8)
    return _xml(
        start_response, err.status, ET.tostring(root, xml_declaration=True, encoding="UTF-8")
    )


STATE = DirectoryBuckets(lambda: os.environ.get("IOFLEET_LOCALCLOUD_DIR"))


def install() -> None:
    """Put the stand-in in front of moto's dispatcher (idempotent)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    if getattr(DomainDispatcherApplication, "_iofleet_s3express", False):
        return
    original = DomainDispatcherApplication.__call__

    def call(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        return STATE.wrap(lambda e, s: original(self, e, s))(environ, start_response)

    DomainDispatcherApplication.__call__ = call  # type: ignore[method-assign]
    DomainDispatcherApplication._iofleet_s3express = True  # type: ignore[attr-defined]
