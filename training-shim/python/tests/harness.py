"""Test support: runs a scenario (scenarios.py) as N real worker processes over Gloo on
loopback, with an optional scripted controller standing in for the report endpoint."""

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = sys.executable  # the one running pytest: Debian's /usr/bin/python3 under ctest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeController:
    """The report endpoint (POST /v1/jobs/{job}/reports) on loopback: records every report
    and answers with decide(report) (a decision dict, or None)."""

    def __init__(self, decide=lambda report: None):
        self.reports = []
        self._lock = threading.Lock()
        controller = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                report = json.loads(body)
                with controller._lock:
                    controller.reports.append(report)
                answer = json.dumps({"decision": decide(report)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_port}"

    def close(self):
        self._server.shutdown()
        self._server.server_close()


def run_workers(n, scenario, out_dir, controller=None, env=None, timeout=180, script="scenarios.py"):
    """Runs SCRIPT SCENARIO (scenarios.py, or user_scripts.py) on n worker processes;
    returns [(returncode, output, result dict or None)] by rank. Every process is gone
    when it returns."""
    port = free_port()
    procs = []
    for rank in range(n):
        e = dict(os.environ)
        e.update({"STAR_RANK": str(rank), "STAR_WORLD_SIZE": str(n), "STAR_JOB": "pytest",
                  "STAR_STORE_URL": f"http://127.0.0.1:{port}", "STAR_HOST_STORE": "1" if rank == 0 else "0",
                  "STAR_TIMEOUT_MS": "20000", "STAR_REPORT_EVERY": "2", "OMP_NUM_THREADS": "1"})
        if controller is not None:
            e["STAR_CONTROLLER_URL"] = controller.url
        e.update(env or {})
        procs.append(subprocess.Popen([PYTHON, os.path.join(HERE, script), scenario, str(out_dir)],
                                      env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    results = []
    try:
        for rank, p in enumerate(procs):
            out, _ = p.communicate(timeout=timeout)
            path = os.path.join(str(out_dir), f"{rank}.json")
            result = json.load(open(path)) if os.path.exists(path) else None
            results.append((p.returncode, out, result))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def expect_all_ok(results):
    for rank, (code, out, result) in enumerate(results):
        assert code == 0 and result is not None, f"rank {rank} exited {code}:\n{out}"


def run_beside_ddp(n, ours, theirs, tmp_path, script="scenarios.py"):
    """Runs worker program `ours` (star.torch) and `theirs` (PyTorch's own DDP over Gloo)
    on n workers each; returns ours's results and theirs's rank 0 parameters."""
    import torch
    (tmp_path / "star").mkdir()
    (tmp_path / "ddp").mkdir()
    star = run_workers(n, ours, tmp_path / "star", script=script)
    expect_all_ok(star)
    ddp = run_workers(n, theirs, tmp_path / "ddp", env={"DDP_PORT": str(free_port())}, script=script)
    expect_all_ok(ddp)
    return star, torch.tensor(ddp[0][2]["params"])
