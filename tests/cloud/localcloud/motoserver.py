"""moto server with the local-cloud hooks installed: `python -m tests.cloud.localcloud.motoserver -H HOST -p PORT`."""

from __future__ import annotations

import sys

from tests.cloud.localcloud import hooks

if __name__ == "__main__":
    hooks.install()
    from moto.server import main

    sys.exit(main(sys.argv[1:]))
