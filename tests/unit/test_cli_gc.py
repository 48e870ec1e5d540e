"""`iofleet local` and `iofleet agent` load their modules without the cyclic garbage
collector (iofleet.cli.modules_loading), and leave it as they found it."""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys

from iofleet.cli import modules_loading


def test_collection_is_off_while_loading_and_back_on_after() -> None:
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    with modules_loading(argparse.Namespace()):
        assert not gc.isenabled()
    assert gc.isenabled()
    # called from another program (not the command line's process): nothing frozen
    assert gc.get_freeze_count() == frozen


def test_an_embedding_program_that_turned_collection_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with modules_loading(argparse.Namespace()):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_command_lines_process_freezes_what_it_loaded() -> None:
    code = (
        "import argparse, gc, json\n"
        "from iofleet.cli import modules_loading\n"
        "before = gc.get_freeze_count()\n"
        "with modules_loading(argparse.Namespace(whole_process=True)):\n"
        "    import iofleet.local.runner\n"
        "print(json.dumps([before, gc.get_freeze_count(), gc.isenabled()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, enabled = json.loads(out.stdout)
    assert after > before and enabled is True
