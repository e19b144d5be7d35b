#!/usr/bin/env python3
"""Images and examples agree (ctest star_repo_images, label repo): every image that an
example or benchmark manifest (examples/, bench/), the chart's defaults (helm/star) or the
docs (README.md, docs/) name is one that scripts/images.sh builds under that name, from a
target the Dockerfile has, under the one registry images.sh sets."""
import glob
import os
import re
import subprocess
import unittest

import yaml

ROOT = os.environ.get("STAR_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def built_images():
    """{reference: Dockerfile target} as `scripts/images.sh list` prints them (the default
    registry: STAR_REGISTRY unset)."""
    env = {k: v for k, v in os.environ.items() if k != "STAR_REGISTRY"}
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "images.sh"), "list"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return {ref: target for target, ref in (line.split() for line in out.splitlines() if line.strip())}


def registry_of(ref):
    return ref.rsplit("/", 1)[0]


def manifest_images(text):
    """Every value of an `image` key in the YAML documents of `text` (containers at any depth)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for doc in yaml.safe_load_all(text):
        walk(doc)
    return found


def mentioned_images(text, registry):
    """Image references under `registry` written in prose or commands (docs)."""
    return re.findall(re.escape(registry) + r"/[A-Za-z0-9._/-]+:[A-Za-z0-9._-]+", text)


def chart_images(chart_dir):
    """The images the chart names with its default values: REGISTRY/NAME:TAG for every
    imageName (as templates/_helpers.tpl's star.image writes them)."""
    values = yaml.safe_load(open(os.path.join(chart_dir, "values.yaml")))
    chart = yaml.safe_load(open(os.path.join(chart_dir, "Chart.yaml")))
    registry = values["image"]["registry"].rstrip("/")
    tag = values["image"]["tag"] or chart["appVersion"]
    names = []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "imageName":
                    names.append(value)
                walk(value)

    walk(values)
    return [f"{registry}/{name}:{tag}" if registry else f"{name}:{tag}" for name in names]


def files(*patterns):
    out = []
    for pattern in patterns:
        out += glob.glob(os.path.join(ROOT, pattern), recursive=True)
    return sorted(p for p in out if "/build" not in os.path.relpath(p, ROOT).split(os.sep)[0])


class ImagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.built = built_images()
        registries = {registry_of(ref) for ref in cls.built}
        assert len(registries) == 1, f"scripts/images.sh: one registry for every image, got {registries}"
        cls.registry = registries.pop()

    def unknown(self, refs):
        return sorted(set(refs) - set(self.built))

    def test_the_checks_catch_a_name_nothing_builds(self):
        manifest = ("kind: TrainingJob\nspec:\n  workers:\n    template:\n      spec:\n        containers:\n"
                    f"          - {{name: t, image: {self.registry}/fmnist:9.9}}\n")
        self.assertEqual(self.unknown(manifest_images(manifest)), [f"{self.registry}/fmnist:9.9"])
        self.assertEqual(mentioned_images(f"run `{self.registry}/fmnist:0.1` here", self.registry),
                         [f"{self.registry}/fmnist:0.1"])

    def test_every_target_is_a_dockerfile_stage(self):
        stages = set(re.findall(r"(?im)^FROM\s+\S+\s+AS\s+(\S+)", open(os.path.join(ROOT, "Dockerfile")).read()))
        self.assertEqual(sorted(set(self.built.values()) - stages), [], "targets the Dockerfile lacks")

    def test_the_chart_names_the_built_images_under_the_same_registry(self):
        chart = os.path.join(ROOT, "helm", "star")
        images = chart_images(chart)
        self.assertTrue(images, "the chart names no imageName")
        self.assertEqual(self.unknown(images), [], "helm/star/values.yaml (image.registry, *.imageName, "
                                                   "image.tag or Chart.yaml's appVersion)")

    def test_every_example_and_benchmark_manifest_names_a_built_image(self):
        manifests = files("examples/**/*.yaml", "bench/**/*.yaml")
        self.assertTrue(manifests)
        bad = {}
        for path in manifests:
            refs = manifest_images(open(path).read())
            if self.unknown(refs):
                bad[os.path.relpath(path, ROOT)] = self.unknown(refs)
        self.assertEqual(bad, {}, "images no Dockerfile target is built as (scripts/images.sh list)")

    def test_the_docs_name_only_built_images(self):
        bad = {}
        for path in files("README.md", "docs/**/*.md"):
            refs = mentioned_images(open(path).read(), self.registry)
            if self.unknown(refs):
                bad[os.path.relpath(path, ROOT)] = self.unknown(refs)
        self.assertEqual(bad, {})


if __name__ == "__main__":
    unittest.main()
