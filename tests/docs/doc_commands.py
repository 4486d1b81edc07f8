#!/usr/bin/env python3
"""Runs the commands the documentation shows, and checks its links.

    doc_commands.py run   --source SRC --build BUILD [--outside] PAGE   every `sh` block of PAGE
    doc_commands.py check --source SRC PAGE...              links, anchors, code blocks, annotations
    doc_commands.py regenerate --source SRC --build BUILD [--outside] PAGE
                                                            runs PAGE, rewrites its output blocks' numbers

`run` executes every command of every ```sh / ```bash block of PAGE (a path from SRC), in
order, in one scratch directory that looks like a checkout (its top-level entries are links to
SRC's, `build` a link to BUILD), with HOME there too. With --outside the scratch directory is
empty, as a reader's own folder outside the clone is, and each command is run as README says
to run it from there: `build/`, `configs/` and `scripts/` written with the clone's full path. An HTML comment right above a block,
`<!-- doc-test: DIRECTIVE -->`, changes how that block runs; tests/docs/README.md lists the
directives. A block cannot be skipped: a command either runs as shown, runs in the reduced form
its directives spell out, or is shown to be run by another file (`ran-by`).

`check` fails on a relative link whose file or #anchor does not exist, on a code block
without a language (a command must be in a `sh` block to be run, output in a `text` one), on
a directive that is unknown, misplaced or matches nothing, and on a docs/ page that
docs/README.md does not link.

Exit status: 0 when everything passed, 1 otherwise (each failure is printed with its
file:line).
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata

COMMAND_LANGUAGES = {"sh", "bash", "shell"}
DEFAULT_TIMEOUT_S = 600
DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")


class DocError(Exception):
    pass


class Block:
    """A fenced code block: where it is, its language, its text and the directives above it."""

    def __init__(self, path, line, language, text, directives):
        self.path, self.line, self.language, self.text = path, line, language, text
        self.directives = directives  # [(line, name, argument)]

    def where(self, line=None):
        return f"{self.path}:{line or self.line}"


def read_text(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def parse_directive(text):
    name, _, argument = text.partition(" ")
    return name, argument.strip()


def read_blocks(source, page):
    """The fenced blocks of `page`; raises DocError for an untagged block or a stray directive."""
    lines = read_text(os.path.join(source, page)).split("\n")
    blocks, pending, i = [], [], 0
    while i < len(lines):
        directive = DIRECTIVE.match(lines[i])
        if directive:
            pending.append((i + 1, *parse_directive(directive.group(1))))
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            if pending and lines[i].strip():
                raise DocError(f"{page}:{pending[0][0]}: a doc-test directive must stand right above a code block")
            i += 1
            continue
        indent, marker, language = fence.groups()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise DocError(f"{page}:{start}: the code block is not closed")
        i += 1
        if not language:
            raise DocError(f"{page}:{start}: a code block without a language; tag it `sh` (commands, run by "
                           f"tests/docs) or `text` (output), `yaml`, `cpp`, ...")
        blocks.append(Block(page, start, language, "\n".join(body) + "\n", pending))
        pending = []
    if pending:
        raise DocError(f"{page}:{pending[0][0]}: a doc-test directive must stand right above a code block")
    return blocks


# ---------------------------------------------------------------------------------------------
# Commands of a block, and the directives that shape them

def logical_lines(text):
    """(line offset, command) for each command: continuations joined, comments and blanks dropped."""
    commands, current, first = [], "", None
    for n, raw in enumerate(text.split("\n")):
        if first is None:
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
            first = n
        if raw.endswith("\\"):
            current += raw[:-1] + " "
            continue
        commands.append((first, (current + raw).strip()))
        current, first = "", None
    if first is not None:
        commands.append((first, current.strip()))
    return commands


def without_comment(command):
    """The command without a trailing `# comment` (one outside quotes)."""
    quote = None
    for k, c in enumerate(command):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (k == 0 or command[k - 1].isspace()):
            return command[:k].rstrip()
    return command.rstrip()


def runs_subcommand(command, subcommand):
    return re.search(r"(hpu-train(-custom)?|local-cluster\.sh\b.*\s--)\s+" + re.escape(subcommand) + r"(\s|$)",
                     command) is not None


class Plan:
    """What running a block means once its directives are applied."""

    KNOWN = {"replace", "append", "ran-by", "before", "parallel", "needs", "timeout", "exit", "expect",
             "fresh-dir", "same-as", "output"}

    def __init__(self, block, source):
        self.block = block
        self.text = block.text
        self.before, self.ran_by, self.expect = [], [], []
        self.parallel = self.fresh_dir = False
        self.needs_interop = False
        self.timeout_s, self.exit_code = DEFAULT_TIMEOUT_S, 0
        self.same_as = None
        self.output = False
        appends = []
        for line, name, arg in block.directives:
            where = block.where(line)
            if name not in self.KNOWN:
                raise DocError(f"{where}: unknown doc-test directive '{name}' (known: {', '.join(sorted(self.KNOWN))})")
            if name == "same-as":
                self.same_as = (line, arg)
                continue
            if name == "output":
                if block.language in COMMAND_LANGUAGES:
                    raise DocError(f"{where}: 'output' marks the block that shows a command block's output; "
                                   f"this block is `{block.language}`")
                self.output = True
                continue
            if block.language not in COMMAND_LANGUAGES:
                raise DocError(f"{where}: '{name}' applies to `sh` blocks; this block is `{block.language}`")
            if name == "replace":
                old, sep, new = arg.partition(" => ")
                if not sep or not old:
                    raise DocError(f"{where}: replace needs 'OLD => NEW'")
                if old not in self.text:
                    raise DocError(f"{where}: replace: '{old}' is not in the block (stale directive?)")
                self.text = self.text.replace(old, new)
            elif name == "append":
                subcommand, _, args = arg.partition(" ")
                if not args:
                    raise DocError(f"{where}: append needs 'SUBCOMMAND ARGS...'")
                appends.append((line, subcommand, args))
            elif name == "ran-by":
                command, sep, runner = arg.partition(" => ")
                if not sep:
                    raise DocError(f"{where}: ran-by needs 'COMMAND => FILE'")
                self.ran_by.append((line, command.strip(), runner.strip()))
            elif name == "before":
                self.before.append(arg)
            elif name == "parallel":
                self.parallel = True
            elif name == "fresh-dir":
                self.fresh_dir = True
            elif name == "needs":
                if arg != "interop":
                    raise DocError(f"{where}: needs: only 'interop' is known (.venv/interop)")
                self.needs_interop = True
            elif name == "timeout":
                self.timeout_s = int(arg)
            elif name == "exit":
                self.exit_code = int(arg)
            elif name == "expect":
                self.expect.append((line, re.compile(arg)))
        if self.same_as:
            line, path = self.same_as
            target = os.path.join(source, path)
            if not os.path.isfile(target):
                raise DocError(f"{block.where(line)}: same-as: {path} does not exist")
            if read_text(target).rstrip("\n") != block.text.rstrip("\n"):
                raise DocError(f"{block.where()}: the block differs from {path}; show the file as it is")
        self.commands = [(block.line + 1 + offset, command) for offset, command in logical_lines(self.text)]
        for line, subcommand, args in appends:
            hits = 0
            for k, (at, command) in enumerate(self.commands):
                if runs_subcommand(command, subcommand):
                    bare = without_comment(command)
                    self.commands[k] = (at, bare + " " + args + command[len(bare):])
                    hits += 1
            if not hits:
                raise DocError(f"{block.where(line)}: append: no command of the block runs '{subcommand}'")
        for line, command, runner in self.ran_by:
            matching = [c for c in self.commands if without_comment(c[1]) == command]
            if not matching:
                raise DocError(f"{block.where(line)}: ran-by: '{command}' is not a command of the block")
            runner_path = os.path.join(source, runner)
            if not os.path.isfile(runner_path) or command not in [
                    l.strip() for l in read_text(runner_path).split("\n")]:
                raise DocError(f"{block.where(line)}: ran-by: {runner} does not run '{command}' on a line of its own")
            self.commands = [c for c in self.commands if c not in matching]


# ---------------------------------------------------------------------------------------------
# Running

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CLONE_PATH = re.compile(r"(?<![\w./~$-])(build|configs|scripts)/")


def from_outside(command, source, build):
    """`command` as typed in a folder outside the clone: the clone's build/, configs/ and scripts/
    by their full paths (README: "From another directory")."""
    return CLONE_PATH.sub(lambda m: (build if m.group(1) == "build" else os.path.join(source, m.group(1))) + "/",
                          command)


def make_scratch(source, build, outside):
    return tempfile.mkdtemp(prefix="hpu-doc-walk-") if outside else make_checkout(source, build)


def make_checkout(source, build):
    """A scratch directory whose top-level entries are those of the checkout, `build` the build tree."""
    root = tempfile.mkdtemp(prefix="hpu-doc-")
    for entry in os.listdir(source):
        if entry in {".git", "lightning_logs"} or entry.startswith("build"):
            continue
        os.symlink(os.path.join(source, entry), os.path.join(root, entry))
    os.symlink(build, os.path.join(root, "build"))
    return root


def interop_python(source):
    return os.path.join(source, ".venv", "interop", "bin", "python")


def in_ci():
    return os.environ.get("CI") == "true"


def start(command, cwd, env, log):
    return subprocess.Popen(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def finish(process, deadline):
    """The exit code, or None after the deadline (the command's process group is then killed)."""
    try:
        return process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None


def tail(path, lines=40):
    return "\n".join(read_text(path).split("\n")[-lines:])


def run_block(plan, cwd, env, logs, rewrite=lambda command: command):
    """Runs one block's commands, each through `rewrite`; returns the failures as messages."""
    failures = []
    steps = [(plan.block.line, command) for command in plan.before] + plan.commands
    groups = [steps[:len(plan.before)], steps[len(plan.before):]] if plan.parallel else [[s] for s in steps]
    output = []
    for group in [g for g in groups if g]:
        started = time.monotonic()
        running = []
        for line, command in group:
            log_path = os.path.join(logs, f"line{line}-{len(os.listdir(logs))}.log")
            log = open(log_path, "w")
            running.append((line, command, log_path, log, start(rewrite(command), cwd, env, log)))
        deadline = started + plan.timeout_s
        for line, command, log_path, log, process in running:
            code = finish(process, deadline)
            log.close()
            output.append(read_text(log_path))
            seconds = time.monotonic() - started
            expected = 0 if (line, command) not in plan.commands else plan.exit_code
            if code is None:
                failures.append(f"{plan.block.path}:{line}: timed out after {plan.timeout_s} s: {command}\n{tail(log_path)}")
                print(f"  TIMEOUT {plan.block.path}:{line} ({seconds:.1f} s) {command}", flush=True)
            elif code != expected:
                failures.append(f"{plan.block.path}:{line}: exit {code} (expected {expected}): {command}\n{tail(log_path)}")
                print(f"  FAIL {plan.block.path}:{line} exit {code} ({seconds:.1f} s) {command}", flush=True)
            else:
                print(f"  ok   {plan.block.path}:{line} ({seconds:.1f} s) {command}", flush=True)
        if failures:
            break
    text = "".join(output)
    if not failures:
        for line, pattern in plan.expect:
            if not pattern.search(text):
                failures.append(f"{plan.block.where(line)}: expect: no output of the block matches /{pattern.pattern}/")
    return failures, text


# ---------------------------------------------------------------------------------------------
# Output blocks: a `text` block under `<!-- doc-test: output -->` shows lines of the output of
# the command block above it. Its lines must appear there in order; `...` stands for any text
# (a line of its own: any lines), runs of spaces for any spaces. `regenerate` rewrites the
# numbers of such a block from what the commands print now.

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def line_pattern(shown):
    """A regex for one shown line; its groups are the shown line's numbers, in order."""
    parts = []
    for k, piece in enumerate(shown.strip().split("...")):
        if k:
            parts.append(".*?")
        at = 0
        for m in NUMBER.finditer(piece):
            parts.append(re.sub(r"(?:\\ )+", r"\\s+", re.escape(piece[at:m.start()])))
            parts.append(r"(-?\d[\d,]*(?:\.\d+)?)")
            at = m.end()
        parts.append(re.sub(r"(?:\\ )+", r"\\s+", re.escape(piece[at:])))
    return re.compile(r"^\s*" + "".join(parts) + r"\s*$")


def match_output(shown_text, output, with_numbers):
    """(unmatched shown lines, regenerated text): each shown line matched in order against the
    output's lines, exactly (numbers included) or, `with_numbers` False, with any numbers."""
    out_lines = output.split("\n")
    unmatched, regenerated, at = [], [], 0
    for shown in shown_text.rstrip("\n").split("\n"):
        if shown.strip() in ("", "..."):
            regenerated.append(shown)
            continue
        pattern = line_pattern(shown)
        found = None
        for k in range(at, len(out_lines)):
            m = pattern.match(out_lines[k])
            if m and (not with_numbers or list(m.groups()) == NUMBER.findall(shown)):
                found = (k, m)
                break
        if found is None:
            unmatched.append(shown)
            regenerated.append(shown)
            continue
        at = found[0] + 1
        numbers = iter(found[1].groups())
        regenerated.append(NUMBER.sub(lambda _: next(numbers), shown))
    return unmatched, "\n".join(regenerated) + "\n"


def run_page(source, build, page, outside=False, regenerate=None):
    """Runs PAGE's commands; returns (failures, blocks skipped). With `regenerate` (a dict), the
    text of every output block, its numbers as the commands print them now, is put in it by the
    block's first line."""
    blocks = read_blocks(source, page)
    plans = [Plan(b, source) for b in blocks]
    runnable = [p for p in plans if p.block.language in COMMAND_LANGUAGES]
    print(f"{page}: {len(runnable)} command blocks, {sum(len(p.commands) for p in runnable)} commands", flush=True)
    failures, skipped, last_output = [], 0, None
    scratch = [make_scratch(source, build, outside), tempfile.mkdtemp(prefix="hpu-doc-logs-")]
    rewrite = (lambda command: from_outside(command, source, build)) if outside else (lambda command: command)
    if outside:
        print(f"  from {scratch[0]}, outside the clone: build/, configs/, scripts/ by their full paths", flush=True)
    logs = scratch[1]
    try:
        cwd = scratch[0]
        for plan in plans:
            if plan.output:
                if last_output is None:
                    failures.append(f"{plan.block.where()}: output: no command block above ran")
                    continue
                unmatched, text = match_output(plan.block.text, last_output, with_numbers=regenerate is None)
                if regenerate is not None:
                    regenerate[plan.block.line] = text
                    unmatched, _ = match_output(plan.block.text, last_output, with_numbers=False)
                for shown in unmatched:
                    failures.append(f"{plan.block.where()}: output: the commands above do not print: {shown.strip()}"
                                    + ("" if regenerate is not None else
                                       " (tests/docs/doc_commands.py regenerate rewrites the numbers)"))
                continue
            if plan not in runnable:
                continue
            for line, command, runner in plan.ran_by:
                print(f"  ok   {plan.block.path}:{line} run by {runner}: {command}", flush=True)
            last_output = None
            if plan.needs_interop and not os.path.exists(interop_python(source)):
                message = (f"{plan.block.where()}: needs {interop_python(source)} "
                           f"(scripts/install-deps.sh --interop makes it)")
                if in_ci():
                    failures.append(message + "; CI must have it")
                    continue
                print(f"  SKIPPED {message}", flush=True)
                skipped += 1
                continue
            if plan.fresh_dir:
                cwd = make_scratch(source, build, outside)
                scratch.append(cwd)
            env = dict(os.environ, HOME=cwd, DOC_TEST_PORT=str(free_port()))
            block_failures, last_output = run_block(plan, cwd, env, logs, rewrite)
            failures += block_failures
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)
    return failures, skipped


# ---------------------------------------------------------------------------------------------
# Links

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path):
    found, counts, in_fence = set(), {}, None
    for line in read_text(path).split("\n"):
        fence = FENCE.match(line)
        if fence:
            in_fence = None if in_fence else fence.group(2)[0]
            continue
        if in_fence:
            continue
        heading = re.match(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def prose_lines(path):
    """(line number, text) outside code blocks, inline code removed."""
    in_fence = None
    for n, line in enumerate(read_text(path).split("\n"), 1):
        fence = FENCE.match(line)
        if fence:
            in_fence = None if in_fence else fence.group(2)[0]
            continue
        if not in_fence:
            yield n, re.sub(r"`[^`]*`", "", line)


def check_links(source, page):
    failures, path = [], os.path.join(source, page)
    for n, line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(resolved):
                failures.append(f"{page}:{n}: link to {target}: {os.path.relpath(resolved, source)} does not exist")
                continue
            if anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
                failures.append(f"{page}:{n}: link to {target}: {os.path.relpath(resolved, source)} has no heading "
                                f"with the anchor #{anchor}")
    return failures


def check_pages(source, pages):
    failures = []
    for page in pages:
        try:
            for block in read_blocks(source, page):
                Plan(block, source)
        except DocError as e:
            failures.append(str(e))
        failures += check_links(source, page)
    index = os.path.join(source, "docs", "README.md")
    if os.path.exists(index):
        linked = {os.path.normpath(os.path.join(source, "docs", t.partition("#")[0]))
                  for _, line in prose_lines(index) for t in LINK.findall(line)}
        for name in sorted(os.listdir(os.path.join(source, "docs"))):
            full = os.path.join(source, "docs", name)
            if name.endswith(".md") and name != "README.md" and full not in linked:
                failures.append(f"docs/README.md: does not link docs/{name}; every page belongs in the index")
    return failures


def rewrite_output_blocks(source, page, texts):
    """Puts `texts` (by fence line) as the bodies of PAGE's blocks, indented as their fences."""
    path = os.path.join(source, page)
    lines = read_text(path).split("\n")
    for fence_line in sorted(texts, reverse=True):
        indent = FENCE.match(lines[fence_line - 1]).group(1)
        end = fence_line
        while not lines[end].strip().startswith(FENCE.match(lines[fence_line - 1]).group(2)):
            end += 1
        body = [(indent + l if l else l) for l in texts[fence_line].rstrip("\n").split("\n")]
        lines[fence_line:end] = body
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["run", "check", "regenerate"])
    ap.add_argument("--source", required=True, help="the checkout")
    ap.add_argument("--build", help="the build tree (run)")
    ap.add_argument("--outside", action="store_true",
                    help="run: from an empty folder outside the clone, the clone's paths written in full")
    ap.add_argument("pages", nargs="+", help="Markdown files, as paths from the checkout")
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    if a.mode == "check":
        failures = check_pages(source, a.pages)
        for f in failures:
            print(f"FAIL {f}")
        print(f"{len(a.pages)} pages checked, {len(failures)} problems")
        return 1 if failures else 0
    if not a.build or len(a.pages) != 1:
        ap.error(f"{a.mode} takes --build and one page")
    texts = {} if a.mode == "regenerate" else None
    try:
        failures, skipped = run_page(source, os.path.abspath(a.build), a.pages[0], a.outside, texts)
    except DocError as e:
        failures, skipped = [str(e)], 0
    if texts:
        rewrite_output_blocks(source, a.pages[0], texts)
        print(f"{a.pages[0]}: {len(texts)} output blocks regenerated")
    for f in failures:
        print(f"\nFAIL {f}")
    print(f"\n{a.pages[0]}: {len(failures)} failed" + (f", {skipped} blocks skipped (no .venv/interop)" if skipped else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
