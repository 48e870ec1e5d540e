#!/usr/bin/env python3
"""Open an iofleet HTML report in headless Chromium, as a person would, and check
that every chart drew: the DOM after the page's scripts ran must hold one uPlot
canvas per `<div data-chart=N>`. Optionally writes a screenshot to look at.

    scripts/render-report.py demo-out/report.html [--screenshot /tmp/report.png]

Prints `CHARTS drawn of CHARTS charts` and exits 0 when all drew, 1 when not,
3 when Chromium is missing (apt-get install chromium; `make test-tools`).
Chromium runs offline: no network, no profile of yours (a throwaway one).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--hide-scrollbars",
)


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def run(browser: str, args: list[str], profile: Path) -> str:
    done = subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def drawn(report: Path, screenshot: Path | None = None) -> tuple[int, int]:
    """(charts in the page, canvases uPlot drew) for `report` rendered in Chromium."""
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("chromium")
    url = report.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="iofleet-chromium-") as profile:
        dom = run(browser, ["--dump-dom", url], Path(profile))
        if screenshot is not None:
            run(
                browser,
                [f"--screenshot={screenshot.resolve()}", "--window-size=1400,3000", url],
                Path(profile),
            )
    total = len(re.findall(r'<div class="chart" data-chart="\d+"', dom))
    canvases = len(re.findall(r"<canvas\b", dom))  # the page has no canvas but uPlot's
    return total, canvases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    if not args.report.is_file():
        print(f"{args.report}: no such file", file=sys.stderr)
        return 2
    try:
        total, canvases = drawn(args.report, args.screenshot)
    except FileNotFoundError:
        print("chromium: not installed (apt-get install chromium)", file=sys.stderr)
        return 3
    print(f"{canvases} drawn of {total} charts")
    return 0 if total and canvases == total else 1


if __name__ == "__main__":
    sys.exit(main())
