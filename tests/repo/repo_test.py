#!/usr/bin/env python3
"""Checks on the repository itself, run by ctest (label repo):

- TrackedOutputsTest: no build or test output is tracked by git (Testing/, build*/,
  CMakeFiles/, CMakeCache.txt, object files and libraries, __pycache__, benchmark out/).
- GeneratedDocsTest: docs/reference/ is what docs/gen/gen_docs.py generates from the CRDs,
  the chart's schema, the code's metric registrations and the alert rules.
- LinksTest: every relative link in README.md and docs/ names a file that exists.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

ROOT = os.environ.get("STAR_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

OUTPUT = re.compile(r"""(^|/)(Testing|CMakeFiles|__pycache__|node_modules)/
                      |^build[^/]*/
                      |(^|/)CMakeCache\.txt$
                      |(^|/)(CTestTestfile|cmake_install)\.cmake$
                      |(^|/)build\.ninja$
                      |\.(o|obj|a|so|pyc|gcda|gcno)$
                      |^bench/[^/]+/out(/|\.json$)
                      |(^|/)demo-(report|summary)\.json$|(^|/)demo\.png$""", re.X)


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


class TrackedOutputsTest(unittest.TestCase):
    def setUp(self):
        if not shutil.which("git") or not os.path.exists(os.path.join(ROOT, ".git")):
            self.skipTest("not a git checkout")

    def test_the_pattern_catches_outputs_and_spares_sources(self):
        for p in ("Testing/Temporary/LastTest.log", "build/cli/star", "build-asan/x",
                  "core/CMakeFiles/a.dir/b.o", "x/CMakeCache.txt", "a/b.o",
                  "tools/__pycache__/m.pyc", "bench/tta/out/run1/r.json"):
            self.assertTrue(OUTPUT.search(p), p)
        for p in ("core/src/detect/mad.cc", "cmake/StarLayers.cmake", "scripts/build.sh",
                  "bench/tta/results.md", "docs/reference/metrics.md", "CMakeLists.txt"):
            self.assertFalse(OUTPUT.search(p), p)

    def test_no_build_or_test_output_is_tracked(self):
        bad = [p for p in tracked_files() if OUTPUT.search(p)]
        self.assertEqual(bad, [], "build or test output tracked by git (git rm --cached it "
                                  "and add it to .gitignore)")


class GeneratedDocsTest(unittest.TestCase):
    def test_references_are_up_to_date(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "docs", "gen", "gen_docs.py"),
                            "--check"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


class LinksTest(unittest.TestCase):
    def test_relative_links_resolve(self):
        docs = [os.path.join(ROOT, "README.md")]
        for root, _, files in os.walk(os.path.join(ROOT, "docs")):
            docs += [os.path.join(root, f) for f in files if f.endswith(".md")]
        docs += [os.path.join(ROOT, "bench", "README.md")]
        missing = []
        for doc in docs:
            text = re.sub(r"```.*?```", "", open(doc).read(), flags=re.S)
            for target in LINK.findall(re.sub(r"`[^`\n]*`", "", text)):
                if re.match(r"[a-z]+:", target):
                    continue
                if not os.path.exists(os.path.join(os.path.dirname(doc), target)):
                    missing.append(f"{os.path.relpath(doc, ROOT)}: {target}")
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main()
