"""What the app benchmarks share: a real ``streamlit run app.py`` on loopback over a store, and Chromium's flags.

Traffic goes only to 127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "store_v1"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store: Path, app: str = "app.py", env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A StitchLab server over ``store`` on a free port (or another Streamlit ``app`` file, run from the
    repository root; ``env``: more environment, e.g. class mode's key): (its process, its base URL), once it
    answers."""
    port = free_port()
    env = {**os.environ, "STITCHLAB_STORE": str(store), "HF_HUB_OFFLINE": "1", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", app, "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(180):
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("streamlit did not start")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def idle(page, timeout_ms: int = 120_000) -> None:
    """Wait until Streamlit has drawn the page and finished running its script."""
    page.wait_for_selector('[data-testid="stMainBlockContainer"]', timeout=timeout_ms)
    page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)
