"""The trace viewer in a real browser: JupyterLab + headless Chromium, driven by Playwright.

Starts JupyterLab on 127.0.0.1, opens lesson 07 (a copy of the solution notebook in a
temporary folder, replaying the committed cassettes), runs every cell, finds the
viewer cell's widget, clicks "下一步 ▶" and checks that the panel shows another step.
A screenshot goes to test-artifacts/. Uses Debian's /usr/bin/chromium (no browser
download); .ci/run installs it. Without it the test is skipped locally, but fails in CI.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "solutions" / "07_trace_context.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (see .ci/run)")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    if not LESSON.exists():
        pytest.fail(f"{LESSON.name} is missing")
    folder = tmp_path_factory.mktemp("lab")
    log = tmp_path_factory.mktemp("lablog") / "jupyterlab.log"  # outside the served folder
    shutil.copy(LESSON, folder / LESSON.name)
    port, token = free_port(), secrets.token_hex(16)
    env = os.environ | {"VIBE_AGENT_MODE": "replay",
                        "VIBE_AGENT_CASSETTES": str(ROOT / "notebooks" / "cassettes")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={folder}",
         "--LabApp.expose_app_in_browser=True", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{base}/api/status?token={token}", timeout=2).status_code == 200:
                break
        except httpx2.HTTPError:
            pass
        time.sleep(0.5)
    else:
        server.terminate()
        pytest.fail("JupyterLab did not start within 60 s:\n"
                    + log.read_text(encoding="utf-8")[-2000:])
    yield f"{base}/lab/tree/{LESSON.name}?token={token}"
    server.terminate()
    server.wait(timeout=30)


def test_viewer_moves_one_step_in_jupyterlab(jupyterlab):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                             args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(jupyterlab)
            page.wait_for_function("window.jupyterapp && window.jupyterapp.shell",
                                   timeout=60_000)
            page.wait_for_selector(".jp-Notebook", timeout=60_000)
            # run-all before the kernel is connected would run nothing: wait until idle
            page.wait_for_function(
                "window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel"
                "?.status === 'idle'", timeout=120_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            viewer = page.locator(".vibe-trace-viewer").first
            viewer.wait_for(timeout=120_000)
            viewer.scroll_into_view_if_needed()
            panel = viewer.locator(".widget-html-content")
            # textContent, not innerText: JupyterLab may not have laid the cell out yet
            before = panel.text_content()
            assert "1 /" in before  # the viewer starts at step 1
            viewer.get_by_role("button", name="下一步 ▶").click()
            page.wait_for_function(
                "([el, old]) => el.textContent !== old",
                arg=[panel.element_handle(), before], timeout=10_000)
            after = panel.text_content()
            page.screenshot(path=str(ARTIFACTS / "trace_viewer.png"), full_page=False)
        finally:
            browser.close()
    assert after != before and "2 /" in after
