#!/usr/bin/env python3
"""doc_commands.py judged on pages made to fail: each defect it exists to catch is caught, with
its file:line, and what is right passes. Runs without a build (the commands here are shell
built-ins and the build tree is an empty folder)."""

import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import doc_commands  # noqa: E402


class DocCommandsTest(unittest.TestCase):
    def setUp(self):
        self.source = tempfile.mkdtemp(prefix="doc-commands-test-")
        self.build = os.path.join(self.source, "build-tree")
        os.makedirs(os.path.join(self.source, "docs"))
        os.makedirs(self.build)
        self.write("runner.sh", "#!/bin/sh\nscripts/slow.sh\n")
        self.write("shipped.yaml", "a: 1\n")

    def tearDown(self):
        shutil.rmtree(self.source)

    def write(self, path, text):
        with open(os.path.join(self.source, path), "w") as f:
            f.write(text)

    def check(self, page, text, index=True):
        self.write(page, text)
        if index:
            self.write("docs/README.md", "[page](page.md)\n" if page == "docs/page.md" else "")
        return doc_commands.check_pages(self.source, [page])

    def run_page(self, text, outside=False):
        self.write("page.md", text)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            failures, skipped = doc_commands.run_page(self.source, self.build, "page.md", outside)
        return failures, skipped, out.getvalue()

    def test_an_untagged_code_block_is_refused(self):
        self.assertEqual(self.check("page.md", "text\n\n```\nbuild/hpu-train fit\n```\n"),
                         ["page.md:3: a code block without a language; tag it `sh` (commands, run by tests/docs) "
                          "or `text` (output), `yaml`, `cpp`, ..."])

    def test_a_link_to_a_missing_file_or_heading_fails(self):
        self.write("docs/other.md", "# Other page\n\n## Some `code` (here)\n")
        failures = self.check("docs/page.md", "[ok](other.md#some-code-here) [gone](nope.md)\n"
                                              "[no anchor](other.md#missing) ![image](../img.svg) `[code](x.md)`\n"
                                              "[web](https://example.com/x.md)\n")
        self.assertEqual(failures, [
            "docs/page.md:1: link to nope.md: docs/nope.md does not exist",
            "docs/page.md:2: link to other.md#missing: docs/other.md has no heading with the anchor #missing",
            "docs/page.md:2: link to ../img.svg: img.svg does not exist",
            "docs/README.md: does not link docs/other.md; every page belongs in the index",
        ])

    def test_directives_that_match_nothing_are_stale(self):
        self.assertEqual(self.check("page.md", "<!-- doc-test: replace --gone => --new -->\n```sh\necho hi\n```\n"),
                         ["page.md:1: replace: '--gone' is not in the block (stale directive?)"])
        self.assertEqual(self.check("page.md", "<!-- doc-test: append fit --x=1 -->\n```sh\necho hi\n```\n"),
                         ["page.md:1: append: no command of the block runs 'fit'"])
        self.assertEqual(self.check("page.md", "<!-- doc-test: skip slow -->\n```sh\necho hi\n```\n"),
                         ["page.md:1: unknown doc-test directive 'skip' (known: append, before, exit, expect, "
                          "fresh-dir, needs, output, parallel, ran-by, replace, same-as, timeout)"])
        self.assertEqual(self.check("page.md", "<!-- doc-test: parallel -->\n\nprose\n```sh\necho hi\n```\n"),
                         ["page.md:1: a doc-test directive must stand right above a code block"])

    def test_ran_by_needs_the_runner_to_hold_the_command(self):
        ok = "<!-- doc-test: ran-by scripts/slow.sh => runner.sh -->\n```sh\nscripts/slow.sh   # slow\n```\n"
        self.assertEqual(self.check("page.md", ok), [])
        stale = ok.replace("runner.sh -->", "shipped.yaml -->")
        self.assertEqual(self.check("page.md", stale),
                         ["page.md:1: ran-by: shipped.yaml does not run 'scripts/slow.sh' on a line of its own"])

    def test_a_shown_file_must_be_the_file(self):
        self.assertEqual(self.check("page.md", "<!-- doc-test: same-as shipped.yaml -->\n```yaml\na: 1\n```\n"), [])
        self.assertEqual(self.check("page.md", "<!-- doc-test: same-as shipped.yaml -->\n```yaml\na: 2\n```\n"),
                         ["page.md:2: the block differs from shipped.yaml; show the file as it is"])

    def test_commands_run_in_order_in_one_directory_and_a_failure_names_its_line(self):
        failures, _, out = self.run_page("```sh\necho one > made.txt\n"
                                         "test -f made.txt && \\\n  echo \"$HOME\" | grep -q hpu-doc\n"
                                         "# a comment\nexit 3\necho never\n```\n")
        self.assertEqual(len(failures), 1)
        self.assertTrue(failures[0].startswith("page.md:6: exit 3 (expected 0): exit 3"), failures[0])
        self.assertNotIn("echo never", out)

    def test_directives_shape_what_runs(self):
        failures, _, out = self.run_page(
            "<!-- doc-test: replace 10.0.0.1 => 127.0.0.1 -->\n"
            "<!-- doc-test: append fit --limit -->\n"
            "<!-- doc-test: expect ^hpu-train fit --limit$ -->\n"
            "<!-- doc-test: exit 0 -->\n"
            "```sh\n"
            "echo 10.0.0.1 | grep -qx 127.0.0.1\n"
            "echo hpu-train fit  # a comment stays last\n"
            "```\n"
            "<!-- doc-test: exit 1 -->\n<!-- doc-test: expect nothing-like-this -->\n```sh\nfalse\n```\n")
        self.assertEqual(failures, ["page.md:10: expect: no output of the block matches /nothing-like-this/"], out)

    def test_a_command_past_its_timeout_is_killed_and_fails(self):
        failures, _, _ = self.run_page("<!-- doc-test: timeout 1 -->\n```sh\nsleep 30\n```\n")
        self.assertEqual(len(failures), 1)
        self.assertTrue(failures[0].startswith("page.md:3: timed out after 1 s: sleep 30"), failures[0])

    def test_parallel_commands_run_together(self):
        # One after the other, the reader would wait for the writer until its timeout.
        failures, _, _ = self.run_page("<!-- doc-test: parallel -->\n<!-- doc-test: before mkfifo p -->\n"
                                       "<!-- doc-test: timeout 5 -->\n```sh\n"
                                       "read x < p; test \"$x\" = go\n"
                                       "echo go > p\n```\n")
        self.assertEqual(failures, [])

    def test_from_outside_the_clone_its_paths_are_written_in_full(self):
        self.assertEqual(doc_commands.from_outside(
            "HPU_X=1 build/hpu-train fit --config configs/a.yaml --model.config=configs/b.json && "
            "scripts/c.sh lightning_logs/version_0/build/x ~/configs/y $HOME/scripts/z", "/src", "/bld"),
            "HPU_X=1 /bld/hpu-train fit --config /src/configs/a.yaml --model.config=/src/configs/b.json && "
            "/src/scripts/c.sh lightning_logs/version_0/build/x ~/configs/y $HOME/scripts/z")
        # The folder is empty: nothing of the clone is there but by its full path.
        os.makedirs(os.path.join(self.source, "configs"))
        self.write("configs/a.yaml", "a: 1\n")
        page = "```sh\ntest -z \"$(ls -A)\"\ncat configs/a.yaml\ntest ! -e configs\n```\n"
        failures, _, out = self.run_page(page, outside=True)
        self.assertEqual(failures, [], out)
        self.assertIn("outside the clone", out)
        failures, _, _ = self.run_page(page)  # the checkout-like folder has configs/
        self.assertEqual(len(failures), 1)
        self.assertTrue(failures[0].startswith("page.md:2: exit 1 (expected 0): test -z"), failures[0])

    def test_an_output_block_is_what_the_commands_above_print_and_regenerates(self):
        page = ("```sh\necho 'header'; echo '  throughput   52848 tokens/s (4 stages)'; echo tail\n```\n\n"
                "<!-- doc-test: output -->\n```text\n  ...\n  throughput 52848 tokens/s (4 ...)\n```\n")
        failures, _, out = self.run_page(page)
        self.assertEqual(failures, [], out)
        stale = page.replace("throughput 52848", "throughput 53797")
        failures, _, _ = self.run_page(stale)
        self.assertEqual(failures, ["page.md:6: output: the commands above do not print: throughput 53797 tokens/s "
                                    "(4 ...) (tests/docs/doc_commands.py regenerate rewrites the numbers)"])
        texts = {}
        with contextlib.redirect_stdout(io.StringIO()):
            failures, _ = doc_commands.run_page(self.source, self.build, "page.md", regenerate=texts)
        self.assertEqual(failures, [])
        doc_commands.rewrite_output_blocks(self.source, "page.md", texts)
        with open(os.path.join(self.source, "page.md")) as f:
            self.assertEqual(f.read(), page)
        self.assertEqual(self.check("page.md", "<!-- doc-test: output -->\n```sh\necho\n```\n"),
                         ["page.md:1: 'output' marks the block that shows a command block's output; this block "
                          "is `sh`"])

    def test_without_the_interop_environment_a_block_is_skipped_aloud_and_fails_in_ci(self):
        page = "<!-- doc-test: needs interop -->\n```sh\necho judged\n```\n"
        os.environ.pop("CI", None)
        failures, skipped, out = self.run_page(page)
        self.assertEqual((failures, skipped), ([], 1))
        self.assertIn("SKIPPED page.md:2: needs", out)
        os.environ["CI"] = "true"
        try:
            failures, _, _ = self.run_page(page)
        finally:
            del os.environ["CI"]
        self.assertEqual(len(failures), 1)
        self.assertTrue(failures[0].endswith("; CI must have it"), failures[0])


if __name__ == "__main__":
    unittest.main()
