"""hpu-train's MLFlowLogger against a real MLflow tracking server.

    check_mlflow_server.py HPU_TRAIN CONFIG WORKDIR OUT.json

Starts `mlflow server` (sqlite backend store, artifacts served through the
server, a free loopback port) from this interpreter's environment, runs
hpu-train fit (CONFIG, with MLFlowLogger on the server beside CSVLogger) in
each case below in WORKDIR, and reads back with mlflow's MlflowClient what
the server (or the local file store a run spooled to) holds:
  served     one device, then two: params, tags, status, every metric's
             history against metrics.csv, the artifacts (config, checkpoints)
  outage     the server stopped (SIGSTOP) for 3 s once the run has values,
             then resumed: every value arrives
  down       the server killed once the run has values: the run goes on,
             spools to save_dir; server part and spool together hold every
             value (the server is restarted on its database to read its part)
  killed     hpu-train sent SIGTERM once the run has values: status KILLED
  failed     a run that fails: status FAILED
  unreachable  no server at the URI: exit code and message, before training;
             with MLFLOW_TRACKING_OFFLINE=true the run goes to the file store
  refused    the server's own error (an unknown run_id) in the message
  tokened    MLFLOW_TRACKING_TOKEN through a gateway that checks the bearer
             token (TokenGateway): the run arrives; a wrong token is its 401
  secured    a server with mlflow's basic-auth app behind TLS (a certificate
             made here): https with MLFLOW_TRACKING_USERNAME / _PASSWORD and
             MLFLOW_TRACKING_SERVER_CERT_PATH; a wrong password (the server's
             401) and an unknown CA are errors before training
OUT.json: {"versions": {...}, CASE: {...}}; every server and hpu-train
started is stopped before the script ends (each wait has a deadline).
"""
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import mlflow
from mlflow.tracking import MlflowClient

HPU_TRAIN, CONFIG, WORKDIR, OUT = sys.argv[1:5]
STARTED = []  # processes to stop at the end


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_certificate(directory):
    """A self-signed certificate for 127.0.0.1: (cert.pem, key.pem)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    paths = (os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem"))
    with open(paths[0], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    return paths


class Server:
    def __init__(self, name, port=None, secured=False):
        self.dir = os.path.join(WORKDIR, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = port or free_port()
        self.uri = f"{'https' if secured else 'http'}://127.0.0.1:{self.port}"
        mlflow_bin = os.path.join(os.path.dirname(sys.executable), "mlflow")
        command = [mlflow_bin, "server", "--backend-store-uri", f"sqlite:///{self.dir}/mlflow.db",
                   "--artifacts-destination", f"{self.dir}/artifacts", "--host", "127.0.0.1", "--port",
                   str(self.port), "--workers", "1"]
        env = dict(os.environ)
        context = None
        if secured:  # mlflow's basic-auth app, over TLS
            self.cert, key = make_certificate(self.dir)
            with open(os.path.join(self.dir, "auth.ini"), "w") as f:
                f.write(f"[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///{self.dir}/auth.db\n"
                        "admin_username = admin\nadmin_password = hpu-train-2026-test\n"
                        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
            env.update(MLFLOW_AUTH_CONFIG_PATH=os.path.join(self.dir, "auth.ini"),
                       MLFLOW_FLASK_SERVER_SECRET_KEY="hpu-train-test")
            command += ["--app-name", "basic-auth", "--uvicorn-opts", f"--ssl-keyfile {key} --ssl-certfile {self.cert}"]
            import ssl
            context = ssl.create_default_context(cafile=self.cert)
        self.process = subprocess.Popen(command, stdout=open(os.path.join(self.dir, "server.log"), "a"),
                                        stderr=subprocess.STDOUT, cwd=self.dir, env=env, start_new_session=True)
        STARTED.append(self.process)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"mlflow server exited: {open(os.path.join(self.dir, 'server.log')).read()[-2000:]}")
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2, context=context):
                    return
            except OSError:
                time.sleep(0.3)
        raise SystemExit(f"mlflow server on {self.uri} did not answer within 120 s")

    def signal(self, sig):
        os.killpg(self.process.pid, sig)

    def stop(self):
        if self.process.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait()


class TokenGateway:
    """A loopback gateway in front of `upstream` that passes on only requests
    carrying `Authorization: Bearer TOKEN`, as a deployment's token-checking
    proxy does (no stock mlflow server checks tokens), and answers the others
    401 with mlflow's error body. `authorizations` holds every header seen."""

    def __init__(self, upstream, token):
        import http.server
        import threading
        import urllib.error
        seen = self.authorizations = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self):
                authorization = self.headers.get("Authorization", "")
                seen.append(authorization)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if authorization != "Bearer " + token:
                    status, ctype = 401, "application/json"
                    data = json.dumps({"error_code": "UNAUTHENTICATED", "message": "the bearer token is not valid"})
                    data = data.encode()
                else:
                    request = urllib.request.Request(upstream + self.path, data=body, method=self.command,
                                                     headers={"Content-Type": self.headers.get("Content-Type", "")})
                    try:
                        with urllib.request.urlopen(request, timeout=60) as r:
                            status, ctype, data = r.status, r.headers.get("Content-Type"), r.read()
                    except urllib.error.HTTPError as e:
                        status, ctype, data = e.code, e.headers.get("Content-Type"), e.read()
                self.send_response(status)
                self.send_header("Content-Type", ctype or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def loggers_yaml(name, uri, experiment, run_name, extra=""):
    path = os.path.join(WORKDIR, name + ".yaml")
    with open(path, "w") as f:
        f.write("trainer:\n  logger:\n    - class_path: MLFlowLogger\n      init_args:\n"
                f"        experiment_name: {experiment}\n        run_name: {run_name}\n"
                f"        tracking_uri: '{uri}'\n        tags: {{team: hpu}}\n{extra}"
                "    - class_path: CSVLogger\n      init_args: {save_dir: csv, name: " + run_name + "}\n")
    return path


# A stopped server is noticed within 2 s (outage, down); elsewhere a slow
# answer is no outage.
SHORT_TIMEOUT = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "2"}
FAST_RETRIES = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "12",
                "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0.1", "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0"}


def start_fit(args, env_extra=None):
    env = {"PATH": "/usr/bin:/bin", "HOME": WORKDIR, "OMP_NUM_THREADS": "1", **FAST_RETRIES, **(env_extra or {})}
    process = subprocess.Popen([HPU_TRAIN, "fit", "-c", CONFIG] + args, cwd=WORKDIR, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    STARTED.append(process)
    return process


def finish(process, timeout=300):
    out, err = process.communicate(timeout=timeout)
    return {"exit_code": process.returncode, "stdout": out[-4000:], "stderr": err[-6000:]}


def fit(args, env_extra=None, timeout=300):
    return finish(start_fit(args, env_extra), timeout)


def wait_for_values(client, experiment, process, deadline_s=120):
    """The run of `experiment` once the server holds values of it."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"hpu-train ended before the server had values of {experiment}: " +
                             process.stderr.read()[-3000:])
        e = client.get_experiment_by_name(experiment)
        if e is not None:
            runs = client.search_runs([e.experiment_id])
            if runs and runs[0].data.metrics:
                return runs[0]
        time.sleep(0.1)
    raise SystemExit(f"no values of {experiment} on the server within {deadline_s} s")


def csv_metrics(run_name):
    """metrics.csv of the CSVLogger run named run_name: {key: [(step, value)]}."""
    path = os.path.join(WORKDIR, "csv", run_name, "version_0", "metrics.csv")
    out = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            for key, value in row.items():
                if key != "step" and value != "":
                    out.setdefault(key, []).append([int(row["step"]), float(value)])
    return out


def read_run(client, run):
    history = {}
    for key in run.data.metrics:
        points = client.get_metric_history(run.info.run_id, key)
        history[key] = [[m.step, m.value, m.timestamp] for m in points]
    artifacts = {}

    def walk(path):
        for a in client.list_artifacts(run.info.run_id, path):
            if a.is_dir:
                walk(a.path)
            else:
                artifacts[a.path] = a.file_size

    walk(None)
    return {"run_id": run.info.run_id, "run_name": run.info.run_name, "status": run.info.status,
            "start_time": run.info.start_time, "end_time": run.info.end_time, "params": run.data.params,
            "tags": {k: v for k, v in run.data.tags.items()}, "history": history, "artifacts": artifacts}


def runs_of(client, experiment):
    e = client.get_experiment_by_name(experiment)
    return [read_run(client, client.get_run(r.info.run_id)) for r in client.search_runs([e.experiment_id])] if e else []


def main():
    result = {"versions": {"mlflow": mlflow.__version__}}
    server = Server("server")
    client = MlflowClient(server.uri)
    short = ["--trainer.max_epochs=2", "--trainer.limit_train_batches=8", "--trainer.limit_val_batches=2",
             "--trainer.log_every_n_steps=1"]
    try:
        # served: one device, then two (rank 0 logs), with the checkpoints as artifacts.
        served = {}
        for devices in (1, 2):
            name = f"devices{devices}"
            ran = fit(["-c", loggers_yaml(name, server.uri, "served", name, "        log_model: true\n"),
                       f"--trainer.devices={devices}"] + short)
            served[name] = {"fit": ran, "csv": csv_metrics(name) if ran["exit_code"] == 0 else {}}
        served["runs"] = runs_of(client, "served")
        result["served"] = served

        # outage: the server stops answering for 3 s, then answers again.
        # Long enough (1800 steps) to be still running when the server stops.
        long_run = ["--trainer.max_epochs=6", "--trainer.limit_train_batches=300", "--trainer.limit_val_batches=2",
                    "--trainer.log_every_n_steps=1", "--trainer.enable_checkpointing=false", "--trainer.callbacks=null"]
        process = start_fit(["-c", loggers_yaml("outage", server.uri, "outage", "outage")] + long_run, SHORT_TIMEOUT)
        wait_for_values(client, "outage", process)
        server.signal(signal.SIGSTOP)
        running_at_stop = process.poll() is None
        time.sleep(3)
        server.signal(signal.SIGCONT)
        ran = finish(process)
        result["outage"] = {"fit": ran, "running_at_stop": running_at_stop,
                            "csv": csv_metrics("outage") if ran["exit_code"] == 0 else {},
                            "runs": runs_of(client, "outage")}

        # killed: SIGTERM to hpu-train once the run has values.
        process = start_fit(["-c", loggers_yaml("killed", server.uri, "killed", "killed")] +
                            ["--trainer.max_epochs=100", "--trainer.log_every_n_steps=1",
                             "--trainer.enable_checkpointing=false", "--trainer.callbacks=null"])
        wait_for_values(client, "killed", process)
        process.send_signal(signal.SIGTERM)
        result["killed"] = {"fit": finish(process, 60), "runs": runs_of(client, "killed")}

        # failed: EarlyStopping on a metric nobody logs.
        result["failed"] = {"fit": fit(["-c", loggers_yaml("failed", server.uri, "failed", "failed"),
                                        "--trainer.callbacks+=EarlyStopping",
                                        "--trainer.callbacks.monitor=missing_metric"] + short),
                            "runs": runs_of(client, "failed")}

        # refused: the server's own error, an unknown run_id.
        result["refused"] = {"fit": fit(["-c", loggers_yaml(
            "refused", server.uri, "refused", "refused", "        run_id: 0123456789abcdef0123456789abcdef\n")] + short)}

        # tokened: MLFLOW_TRACKING_TOKEN through a gateway that checks it; a wrong token is its 401.
        gateway = TokenGateway(server.uri, "hpu-train-token-2026")
        ran = fit(["-c", loggers_yaml("tokened", gateway.uri, "tokened", "tokened")] + short,
                  {"MLFLOW_TRACKING_TOKEN": "hpu-train-token-2026"})
        good = list(gateway.authorizations)
        result["tokened"] = {"fit": ran, "runs": runs_of(client, "tokened"), "authorizations": sorted(set(good)),
                             "requests": len(good), "csv": csv_metrics("tokened") if ran["exit_code"] == 0 else {},
                             "wrong_token": fit(["-c", loggers_yaml("wrong_token", gateway.uri, "wrong_token",
                                                                    "wrong_token")] + short,
                                                {"MLFLOW_TRACKING_TOKEN": "stale"})}
        gateway.stop()

        # unreachable: nothing listens on the port; then offline allowed.
        nobody = f"http://127.0.0.1:{free_port()}"
        started = time.monotonic()
        ran = fit(["-c", loggers_yaml("unreachable", nobody, "unreachable", "unreachable")] + short)
        ran["seconds"] = time.monotonic() - started
        offline = fit(["-c", loggers_yaml("offline", nobody, "offline", "offline", "        save_dir: offline_store\n")]
                      + short,
                      {"MLFLOW_TRACKING_OFFLINE": "true"})
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        store = MlflowClient("file://" + os.path.join(WORKDIR, "offline_store"))
        result["unreachable"] = {"fit": ran, "offline": {"fit": offline, "runs": runs_of(store, "offline"),
                                                          "csv": csv_metrics("offline") if offline["exit_code"] == 0 else {}}}

        # down: the server is killed once the run has values; it stays down.
        process = start_fit(["-c", loggers_yaml("down", server.uri, "down", "down", "        save_dir: spool\n")]
                            + long_run,
                            {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", **SHORT_TIMEOUT})
        wait_for_values(client, "down", process)
        server.signal(signal.SIGKILL)
        running_at_stop = process.poll() is None
        server.process.wait()
        ran = finish(process)
        spool = MlflowClient("file://" + os.path.join(WORKDIR, "spool"))
        down = {"fit": ran, "running_at_stop": running_at_stop, "csv": csv_metrics("down") if ran["exit_code"] == 0 else {},
                "spooled": runs_of(spool, "down")}
        server = Server("server", server.port)  # the same database, to read what it took
        down["served"] = runs_of(MlflowClient(server.uri), "down")
        result["down"] = down
        server.stop()

        # secured: https and basic authentication.
        secured = Server("secured", secured=True)
        credentials = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": "hpu-train-2026-test",
                       "MLFLOW_TRACKING_SERVER_CERT_PATH": secured.cert}
        ran = fit(["-c", loggers_yaml("secured", secured.uri, "secured", "secured")] + short, credentials)
        os.environ.update(credentials)
        result["secured"] = {"uri": secured.uri, "fit": ran, "runs": runs_of(MlflowClient(secured.uri), "secured"),
                             "csv": csv_metrics("secured") if ran["exit_code"] == 0 else {},
                             "wrong_password": fit(["-c", loggers_yaml("wrong", secured.uri, "wrong", "wrong")] + short,
                                                   {**credentials, "MLFLOW_TRACKING_PASSWORD": "nope"}),
                             "unknown_ca": fit(["-c", loggers_yaml("ca", secured.uri, "ca", "ca")] + short,
                                               {**credentials, "MLFLOW_TRACKING_SERVER_CERT_PATH": ""})}
        secured.stop()
    finally:
        for p in STARTED:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGCONT)  # each runs in a session of its own
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    print(f"mlflow {mlflow.__version__}: " + ", ".join(k for k in result if k != "versions"))


if __name__ == "__main__":
    main()
