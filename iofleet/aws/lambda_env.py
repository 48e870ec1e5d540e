"""What every Lambda handler shares at import time (kept tiny: it is on every cold start).

`TRACED_MODULES`: the modules Powertools' Tracer patches for X-Ray. Without it
the Tracer calls the X-Ray SDK's `patch_all()`, which imports every library the
SDK can patch that is installed (requests, sqlite3, httplib, mysql, pynamodb
...) just to patch it: tens of milliseconds of every cold start for libraries
no handler calls. The handlers call AWS through boto3 only, which is botocore:
patching it still gives each AWS call its X-Ray subsegment.
"""

from __future__ import annotations

TRACED_MODULES: tuple[str, ...] = ("botocore",)
