"""Reads hpu-train's TensorBoard event files and MLflow store with the real tools.

Run by tests/interop/logger_interop_test.cc with the interpreter of
.venv/interop (scripts/install-deps.sh --interop):

    check_loggers.py CASE.json OUT.json

CASE.json names what to read, each key optional:
    {"protos": DESCRIPTOR_SET,        # protoc --descriptor_set_out of core/loggers/proto
     "tensorboard_logdir": DIR,       # a folder of runs (lightning_logs)
     "mlflow_store": DIR}             # an MLflow file store (mlruns)

OUT.json gets what the tools read; the test compares it with metrics.csv:
    {"versions": {"tensorboard": ..., "mlflow": ...},
     "tensorboard": {
        "files": {run: [[file name, [[step, what], ...]], ...]},   # every record, in order
        "readers": {reader: {run: {"scalars": {tag: [[step, value], ...]},
                                   "text": {tag: [[step, text], ...]},
                                   "hparams": {name: value}, "hparam_types": {name: type},
                                   "metrics": [tag, ...], "status": status}}}},
     "mlflow": [{"experiment_id", "name", "lifecycle_stage", "artifact_location",
                 "runs": [{"run_id", "run_name", "status", "start_time", "end_time",
                           "lifecycle_stage", "params", "tags", "metrics",
                           "history": {key: [[step, value, timestamp], ...]},
                           "artifacts": [...]}]}]}
The readers are EventAccumulator (TensorBoard's Python reader, as a script
reads event files) and the `tensorboard` program itself, asked over HTTP what
its dashboards show, once with its Python reader (--load_fast=false) and once
with its Rust data server (--load_fast=true, the default where it installs).
The protos' field numbers and types are compared with TensorBoard's own;
a difference is printed and the exit code is 1.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

# mlflow 3.x refuses the file store unless it is allowed explicitly.
os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

import tensorboard
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.plugins.hparams import api_pb2 as hparams_api
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.util import tensor_util


def compare_protos(descriptor_set, failures):
    """Every field and enum value of our protos against the installed TensorBoard's."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    # Importing them registers TensorBoard's protos in the default pool.
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2  # noqa: F401
    from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: F401
    from tensorboard.plugins.text import plugin_data_pb2 as text_pb2  # noqa: F401
    pool = descriptor_pool.Default()
    ours = descriptor_pb2.FileDescriptorSet()
    with open(descriptor_set, "rb") as f:
        ours.ParseFromString(f.read())
    checked = 0

    def enum(full, e):
        nonlocal checked
        theirs = pool.FindEnumTypeByName(full)
        for v in e.value:
            checked += 1
            t = theirs.values_by_name.get(v.name)
            if t is None or t.number != v.number:
                failures.append(f"{full}.{v.name} = {v.number}; TensorBoard's is {t.number if t else 'absent'}")

    def message(full, m):
        nonlocal checked
        theirs = pool.FindMessageTypeByName(full)
        for f in m.field:
            checked += 1
            t = theirs.fields_by_name.get(f.name)
            if t is None:
                failures.append(f"{full}.{f.name}: TensorBoard's {full} has no such field")
            elif (t.number, t.type) != (f.number, f.type):
                failures.append(f"{full}.{f.name} is field {f.number} (type {f.type}); "
                                f"TensorBoard's is field {t.number} (type {t.type})")
        for n in m.nested_type:
            message(f"{full}.{n.name}", n)
        for e in m.enum_type:
            enum(f"{full}.{e.name}", e)

    for file in ours.file:
        if not file.package.startswith("tensorboard"):
            continue  # google/protobuf/*.proto, imported
        for m in file.message_type:
            message(f"{file.package}.{m.name}", m)
        for e in file.enum_type:
            enum(f"{file.package}.{e.name}", e)
    print(f"protos: {checked} fields and enum values compared with TensorBoard {tensorboard.__version__}'s")


def runs_of(logdir):
    """Run name (as TensorBoard names it) -> folder, for each folder holding event files."""
    runs = {}
    for root, _, files in os.walk(logdir):
        if any("tfevents" in f for f in files):
            rel = os.path.relpath(root, logdir)
            runs[rel] = root
    return runs


def event_files(folder):
    out = []
    for name in sorted(f for f in os.listdir(folder) if "tfevents" in f):
        records = []
        for e in event_file_loader.LegacyEventFileLoader(os.path.join(folder, name)).Load():
            what = e.WhichOneof("what")
            if what == "summary":
                records.append([e.step, "summary:" + ",".join(v.tag for v in e.summary.value)])
            elif what == "session_log":
                records.append([e.step, "session_log:" + e.session_log.SessionStatus.Name(e.session_log.status)])
            else:
                records.append([e.step, what])
        out.append([name, records])
    return out


def hparams_of(contents):
    """The hparams plugin's three summaries, parsed by the plugin's own functions."""
    out = {}
    if "_hparams_/session_start_info" in contents:
        start = hparams_metadata.parse_session_start_info_plugin_data(contents["_hparams_/session_start_info"])
        out["hparams"] = {k: v.number_value if v.HasField("number_value") else
                          v.string_value if v.HasField("string_value") else v.bool_value
                          for k, v in start.hparams.items()}
    if "_hparams_/experiment" in contents:
        exp = hparams_metadata.parse_experiment_plugin_data(contents["_hparams_/experiment"])
        out["hparam_types"] = {h.name: hparams_api.DataType.Name(h.type) for h in exp.hparam_infos}
        out["metrics"] = [m.name.tag for m in exp.metric_infos]
    if "_hparams_/session_end_info" in contents:
        end = hparams_metadata.parse_session_end_info_plugin_data(contents["_hparams_/session_end_info"])
        out["status"] = hparams_api.Status.Name(end.status)
    return out


def read_accumulator(folder):
    acc = event_accumulator.EventAccumulator(folder, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    run = {"scalars": {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags["scalars"]},
           "text": {}}
    for t in tags["tensors"]:
        if t.endswith("text_summary"):
            run["text"][t] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).flatten()[0].decode()]
                              for e in acc.Tensors(t)]
    run.update(hparams_of(acc.PluginTagToContent(hparams_metadata.PLUGIN_NAME)))
    return run


class TensorBoardProgram:
    """`tensorboard --logdir` on a free port, asked what its dashboards show."""

    def __init__(self, logdir, load_fast):
        self.proc = subprocess.Popen(
            [os.path.join(os.path.dirname(sys.executable), "tensorboard"), "--logdir", logdir, "--port", "0",
             "--load_fast", load_fast, "--reload_interval", "1", "--samples_per_plugin",
             "scalars=100000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.err = []
        deadline = time.time() + 120
        while True:
            line = self.proc.stderr.readline()
            if not line and (self.proc.poll() is not None or time.time() > deadline):
                raise RuntimeError(f"tensorboard --load_fast={load_fast} did not start: {''.join(self.err)}")
            self.err.append(line)
            m = re.search(r"at (http://[^/\s]+)/", line)
            if m:
                self.url = m.group(1)
                break

    def close(self):
        self.proc.kill()
        self.proc.wait()

    def get(self, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def snapshot(self, runs):
        q = urllib.parse.quote
        out = {}
        if sorted(self.get("/data/runs")) != sorted(runs):
            return None
        tags = self.get("/data/plugin/scalars/tags")
        text_tags = self.get("/data/plugin/text/tags")
        for run in runs:
            out[run] = {"scalars": {t: [[p[1], p[2]] for p in
                                        self.get(f"/data/plugin/scalars/scalars?run={q(run)}&tag={q(t)}")]
                                    for t in sorted(tags.get(run, {}))},
                        "text": {t: [[p["step"], p["text"]] for p in
                                     self.get(f"/data/plugin/text/text?run={q(run)}&tag={q(t)}")]
                                 for t in sorted(text_tags.get(run, []))}}
        experiment = self.get("/data/plugin/hparams/experiment", {"experimentName": ""})
        groups = self.get("/data/plugin/hparams/session_groups", {
            "experimentName": "", "startIndex": 0, "sliceSize": 1000, "colParams": [],
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"]})
        for group in groups.get("sessionGroups", []):
            for session in group["sessions"]:
                if session["name"] in out:
                    out[session["name"]].update({
                        "hparams": group["hparams"],
                        "hparam_types": {h["name"]: h["type"] for h in experiment.get("hparamInfos", [])},
                        "metrics": [m["name"]["tag"] for m in experiment.get("metricInfos", [])],
                        "status": session["status"]})
        return out

    def read(self, runs):
        """What the dashboards show once two reads a second apart agree (loaded)."""
        deadline = time.time() + 120
        last = None
        while time.time() < deadline:
            now = self.snapshot(runs)
            if now is not None and now == last and all(
                    points for r in now.values() for points in r["scalars"].values()):
                return now
            last = now
            time.sleep(1.0)
        raise RuntimeError(f"tensorboard at {self.url} did not settle on {sorted(runs)}; last read: {last}")


def read_tensorboard(logdir):
    runs = runs_of(logdir)
    out = {"files": {run: event_files(folder) for run, folder in runs.items()},
           "readers": {"EventAccumulator": {run: read_accumulator(folder) for run, folder in runs.items()}}}
    for load_fast in ("false", "true"):
        program = TensorBoardProgram(logdir, load_fast)
        try:
            out["readers"][f"tensorboard --load_fast={load_fast}"] = program.read(list(runs))
        finally:
            program.close()
    for reader, seen in out["readers"].items():
        print(f"{reader}: " + "; ".join(f"{run}: {sum(len(v) for v in r['scalars'].values())} scalars"
                                        for run, r in sorted(seen.items())))
    return out


def read_mlflow(store):
    import mlflow
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri="file:" + os.path.abspath(store))
    out = []
    for e in client.search_experiments(view_type=ViewType.ALL):
        exp = {"experiment_id": e.experiment_id, "name": e.name, "lifecycle_stage": e.lifecycle_stage,
               "artifact_location": e.artifact_location, "runs": []}
        for r in client.search_runs([e.experiment_id], run_view_type=ViewType.ALL):
            i = r.info
            exp["runs"].append({
                "run_id": i.run_id, "run_name": i.run_name, "status": i.status, "start_time": i.start_time,
                "end_time": i.end_time, "lifecycle_stage": i.lifecycle_stage, "params": r.data.params,
                "tags": r.data.tags, "metrics": r.data.metrics,
                "history": {k: [[m.step, m.value, m.timestamp] for m in client.get_metric_history(i.run_id, k)]
                            for k in sorted(r.data.metrics)},
                "artifacts": sorted(a.path for a in client.list_artifacts(i.run_id))})
        out.append(exp)
    print(f"mlflow {mlflow.__version__}: " + "; ".join(f"{e['name']}: {len(e['runs'])} runs" for e in out))
    return out


def main():
    case = json.load(open(sys.argv[1]))
    import mlflow
    result = {"versions": {"tensorboard": tensorboard.__version__, "mlflow": mlflow.__version__}}
    failures = []
    if case.get("protos"):
        compare_protos(case["protos"], failures)
    if case.get("tensorboard_logdir"):
        result["tensorboard"] = read_tensorboard(case["tensorboard_logdir"])
    if case.get("mlflow_store"):
        result["mlflow"] = read_mlflow(case["mlflow_store"])
    with open(sys.argv[2], "w") as f:
        json.dump(result, f, indent=1)
    for f in failures:
        print("FAIL", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
