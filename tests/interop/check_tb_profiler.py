"""What TensorBoard's PyTorch profiler plugin (torch-tb-profiler) shows of a
log directory of hpu-train traces, asked over the plugin's own HTTP
endpoints, and the fields a real torch.profiler trace has, to hold ours to.

    check_tb_profiler.py LOGDIR OUT.json [--torch-trace DIR]

Starts `tensorboard --logdir LOGDIR` on a free loopback port, waits (at most
120 s) until the plugin has loaded every run, and writes OUT.json:
    {"versions": {"tensorboard", "torch_tb_profiler", "torch"},
     "runs": {RUN: {"workers": [...], "views": {WORKER: [...]},
                    "spans": {WORKER: [...]},
                    "steps": {WORKER: [step names of the overview's breakdown]},
                    "step_columns": [the breakdown's categories],
                    "operators": {WORKER: {name: calls}},
                    "trace_events": {WORKER: number of events the trace view serves}}},
     "torch": {"top_level": [keys], "events": {category: [keys]},
               "event_args": {category: [keys of args]}}}
With --torch-trace DIR, a torch 2.13 CPU profile of a few steps of a tiny
model is written to DIR by torch.profiler.tensorboard_trace_handler and its
fields listed under "torch". The server is stopped before the script ends.
"""
import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PLUGIN = "/data/plugin/pytorch_profiler"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(base, path, **params):
    url = base + PLUGIN + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
        if r.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body)


def read_plugin(logdir):
    port = free_port()
    tensorboard = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen([tensorboard, "--logdir", logdir, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        runs = None
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit("tensorboard exited: " + server.stderr.read())
            try:
                answer = get(base, "/runs")
                if not answer["loading"] and answer["runs"]:
                    runs = answer["runs"]
                    break
            except OSError:
                pass
            time.sleep(0.5)
        if runs is None:
            raise SystemExit(f"the profiler plugin listed no run of {logdir} within 120 s")
        out = {}
        for run in runs:
            r = out[run] = {"workers": get(base, "/workers", run=run, view="Overview"), "views": {}, "spans": {},
                            "steps": {}, "operators": {}, "trace_events": {}}
            for worker in r["workers"]:
                r["views"][worker] = get(base, "/views", run=run)
                spans = get(base, "/spans", run=run, worker=worker)
                r["spans"][worker] = spans
                span = spans[0]
                overview = get(base, "/overview", run=run, worker=worker, span=span)
                r["steps"][worker] = [row[0] for row in overview["steps"]["rows"]]
                r["step_columns"] = [c["name"] for c in overview["steps"]["columns"] if "name" in c]
                table = get(base, "/operation/table", run=run, worker=worker, span=span, group_by="Operation")
                r["operators"][worker] = {op["name"]: op["calls"] for op in table["data"]}
                trace = get(base, "/trace", run=run, worker=worker, span=span)
                r["trace_events"][worker] = len(trace["traceEvents"])
        print("torch-tb-profiler: " + ", ".join(f"{k}: {len(v['workers'])} workers" for k, v in out.items()))
        return out
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def torch_fields(directory):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                record_shapes=True,
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(directory,
                                                                                       worker_name="rank0")) as p:
        for _ in range(6):
            with torch.profiler.record_function("run_training_batch"):
                model(torch.randn(4, 16)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
            p.step()
    [name] = [f for f in os.listdir(directory) if f.endswith(".pt.trace.json")]
    with open(os.path.join(directory, name)) as f:
        trace = json.load(f)
    events, event_args = {}, {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        events.setdefault(e["cat"], set()).update(e)
        event_args.setdefault(e["cat"], set()).update(e.get("args", {}))
    return {"top_level": sorted(trace), "events": {k: sorted(v) for k, v in events.items()},
            "event_args": {k: sorted(v) for k, v in event_args.items()},
            "step_names": sorted({e["name"] for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")})}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("out")
    parser.add_argument("--torch-trace")
    args = parser.parse_args()
    import importlib.metadata as md
    result = {"versions": {p: md.version(p) for p in ("tensorboard", "torch-tb-profiler", "torch")}}
    result["runs"] = read_plugin(args.logdir)
    if args.torch_trace:
        result["torch"] = torch_fields(args.torch_trace)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
