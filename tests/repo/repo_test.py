#!/usr/bin/env python3
"""Checks on the repository itself, run by ctest (label repo):

- TrackedOutputsTest: no build or test output is tracked by git (Testing/, build*/,
  CMakeFiles/, CMakeCache.txt, object files and libraries, __pycache__, benchmark out/).
- GeneratedDocsTest: docs/reference/ is what docs/gen/gen_docs.py generates from the CRDs,
  the chart's schema, the code's metric registrations and the alert rules.
- LinksTest: every relative link in README.md and docs/ names a file that exists.
- PinnedImagesTest: every base image a Dockerfile (FROM, or an *_IMAGE ARG default) or a
  script's inline Containerfile names is pinned by digest (name@sha256:...), not a bare tag.
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


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def unpinned_images(text):
    """The image references of Dockerfile `text` that are not pinned by digest: ARG defaults
    of *_IMAGE arguments and FROM images that are not scratch, an earlier stage, or an
    argument whose default is checked."""
    bad, stages, args = [], set(), set()
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "ARG" and "=" in words[1]:
            name, value = words[1].split("=", 1)
            args.add(name)
            if name.endswith("IMAGE") and not DIGEST.search(value.strip("\"'")):
                bad.append(f"ARG {name}={value}")
        elif len(words) >= 2 and words[0].upper() == "FROM":
            image = next(w for w in words[1:] if not w.startswith("--"))
            if len(words) >= 4 and words[-2].upper() == "AS":
                stages.add(words[-1])
            arg = re.fullmatch(r"\$\{?(\w+)\}?", image)
            if image == "scratch" or image in stages or (arg and arg.group(1) in args):
                continue
            if not DIGEST.search(image):
                bad.append(f"FROM {image}")
    return bad


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


class PinnedImagesTest(unittest.TestCase):
    def test_the_check_tells_tags_from_digests(self):
        digest = "@sha256:" + "0" * 64
        self.assertEqual(unpinned_images("ARG BASE_IMAGE=debian:bookworm-slim\n"),
                         ["ARG BASE_IMAGE=debian:bookworm-slim"])
        self.assertEqual(unpinned_images("FROM debian:bookworm AS build\n"), ["FROM debian:bookworm"])
        self.assertEqual(unpinned_images("FROM --platform=x debian\n"), ["FROM debian"])
        self.assertEqual(unpinned_images(f"ARG BASE_IMAGE=debian:bookworm{digest}\n"
                                         "FROM ${BASE_IMAGE} AS runtime\nFROM runtime AS agent\n"
                                         f"FROM scratch\nFROM busybox{digest}\n"), [])
        self.assertEqual(unpinned_images("FROM ${UNDECLARED}\n"), ["FROM ${UNDECLARED}"])

    def test_dockerfiles_and_inline_containerfiles_pin_base_images_by_digest(self):
        bad = []
        for path in tracked_files() if os.path.exists(os.path.join(ROOT, ".git")) else ["Dockerfile"]:
            name = os.path.basename(path)
            full = os.path.join(ROOT, path)
            if name in ("Dockerfile", "Containerfile") or name.endswith((".Dockerfile", ".Containerfile")):
                bad += [f"{path}: {b}" for b in unpinned_images(read(full))]
            elif name.endswith(".sh") and os.path.isfile(full):
                # Containerfiles written by scripts: printf 'FROM x\n...'
                for image in re.findall(r"FROM ([^\s\\'\"]+)", read(full)):
                    if image != "scratch" and not DIGEST.search(image):
                        bad.append(f"{path}: FROM {image}")
        self.assertEqual(bad, [], "pin base images by digest (name@sha256:...), not by tag")


if __name__ == "__main__":
    unittest.main()
