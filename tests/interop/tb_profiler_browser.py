"""TensorBoard's PyTorch profiler plugin in a real browser: headless Debian
chromium opens http://127.0.0.1:PORT/#pytorch_profiler for a log directory
of hpu-train traces, waits (at most 90 s) until the plugin's page lists the
run, its views and a worker, gives the overview's charts 15 s more, saves a
screenshot and writes what the page says.

    tb_profiler_browser.py LOGDIR OUT_DIR

Writes OUT_DIR/tb_profiler.png and OUT_DIR/tb_profiler.json:
    {"text": the plugin frame's visible text, "overview_drawn": bool, "png_bytes": N}
Exits 1 if the plugin's page did not list a worker in time. The overview's
charts are Google Charts, which the plugin loads from www.gstatic.com: on a
machine without that site they never draw ("overview_drawn": false), and
what they would show is read through the plugin's endpoints instead
(check_tb_profiler.py). Chromium is driven over the DevTools protocol on a
pipe (--remote-debugging-pipe): JSON messages ending in NUL, commands on
its fd 3, answers on its fd 4.
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from check_tb_profiler import free_port, get


class DevTools:
    def __init__(self, profile_dir):
        commands_r, self.commands = os.pipe()
        self.answers, answers_w = os.pipe()
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        # The child's fds 3 and 4 are the two pipes' ends.
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--window-size=1400,1000", "--remote-debugging-pipe", f"--user-data-dir={profile_dir}", "about:blank"],
            pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: (os.dup2(commands_r, 3), os.dup2(answers_w, 4)))
        os.close(commands_r)
        os.close(answers_w)
        self.next_id = 0
        self.buffer = b""

    def call(self, method, session=None, timeout=30, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == self.next_id:
                    if "error" in answer:
                        raise RuntimeError(f"{method}: {answer['error']}")
                    return answer["result"]
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        raise TimeoutError(f"{method}: no answer within {timeout} s")

    def close(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


FRAME_TEXT = """(() => {
  const frame = document.querySelector('iframe');
  const doc = frame && frame.contentDocument;
  return doc && doc.body ? doc.body.innerText : '';
})()"""


def main():
    logdir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    port = free_port()
    tensorboard = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen([tensorboard, "--logdir", logdir, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    profile = tempfile.mkdtemp(prefix="chromium-")
    browser = None
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # the plugin has loaded the runs
            try:
                if not get(base, "/runs")["loading"]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        browser = DevTools(profile)
        [page] = [t for t in browser.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        session = browser.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        browser.call("Page.navigate", session, url=base + "/#pytorch_profiler")
        def frame_text():
            return browser.call("Runtime.evaluate", session, expression=FRAME_TEXT,
                                returnByValue=True)["result"].get("value") or ""

        text = ""
        while time.monotonic() < deadline and "-fit" not in text.partition("Workers")[2]:
            text = frame_text()
            time.sleep(0.5)
        charts_deadline = time.monotonic() + 15
        while time.monotonic() < charts_deadline and "Step Time Breakdown" not in text:
            time.sleep(0.5)
            text = frame_text()
        drawn = "Step Time Breakdown" in text
        if drawn:
            time.sleep(1)  # the charts draw after their data arrives
        png = base64.b64decode(browser.call("Page.captureScreenshot", session, format="png")["data"])
        with open(os.path.join(out_dir, "tb_profiler.png"), "wb") as f:
            f.write(png)
        with open(os.path.join(out_dir, "tb_profiler.json"), "w") as f:
            json.dump({"text": text, "overview_drawn": drawn, "png_bytes": len(png)}, f, indent=1)
        print(f"chromium: screenshot {os.path.join(out_dir, 'tb_profiler.png')} ({len(png)} bytes); overview "
              + ("drawn" if drawn else "charts not drawn (Google Charts from www.gstatic.com unreachable)"))
        if "-fit" not in text.partition("Workers")[2]:
            print("the plugin's page listed no worker within 90 s; it says:\n" + text)
            sys.exit(1)
    finally:
        if browser:
            browser.close()
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
