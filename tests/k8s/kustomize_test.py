#!/usr/bin/env python3
"""deploy/k8s installs with stock `kubectl apply -k`, checked without kubectl.

Two installs, alternatives: deploy/k8s (the device plugin and the gpuslice
scheduler) and deploy/k8s/dra (the DRA driver). The project refuses both
plugins on the same GPUs, so no install may deploy both DaemonSets. Checked:
every path a kustomization names exists and obeys kustomize's default load
restrictor (files inside the kustomization's directory; a base directory
anywhere but at or above it), every referenced YAML document parses, each
install brings the namespaces, service accounts and ConfigMaps its objects
use, its gpuslice images can be set with `images:`, and every manifest in
deploy/k8s that is not an example belongs to an install.

    tests/k8s/kustomize_test.py [DEPLOY_DIR]   (default: this tree's deploy/k8s)
"""
import os
import sys
import unittest

import yaml

DEPLOY = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "k8s"))
INSTALLS = {"classic": ".", "dra": "dra"}  # relative to DEPLOY
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "DeviceClass", "PriorityClass",
                  "CustomResourceDefinition", "StorageClass", "RuntimeClass"}
BUILTIN_NAMESPACES = {"default", "kube-system"}
GPUSLICE_IMAGE_PREFIX = "ghcr.io/gpuslice/"


def inside(path, root):
    return path == root or path.startswith(root + os.sep)


def load_yaml(path, problems):
    try:
        with open(path) as f:
            return [d for d in yaml.safe_load_all(f) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        problems.append(f"{path}: {e}")
        return []


class Install:
    """What one kustomization deploys, following its bases and components."""

    def __init__(self, directory):
        self.objects = []  # every resource document, generated ConfigMaps included
        self.files = set()  # real paths of every file read
        self.images = set()  # names the `images:` fields can replace
        self.namespace_overrides = []  # (kustomization, namespace) of each `namespace:`
        self.problems = []
        self._load(os.path.realpath(directory), [])

    def _load(self, root, visiting):
        names = [n for n in KUSTOMIZATION_NAMES if os.path.isfile(os.path.join(root, n))]
        if len(names) != 1:
            self.problems.append(f"{root}: needs exactly one of {', '.join(KUSTOMIZATION_NAMES)}")
            return
        kpath = os.path.join(root, names[0])
        self.files.add(kpath)
        docs = load_yaml(kpath, self.problems)
        k = docs[0] if len(docs) == 1 and isinstance(docs[0], dict) else {}
        if not k:
            self.problems.append(f"{kpath}: not one YAML mapping")
        for img in k.get("images", []):
            self.images.add(img["name"])
        if k.get("namespace"):
            self.namespace_overrides.append((kpath, k["namespace"]))

        def file_ref(field, ref):
            path = os.path.realpath(os.path.join(root, ref))  # symlinks resolved, as kustomize does
            if not inside(path, root):
                self.problems.append(f"{kpath}: {field} {ref} is outside {root} (load restrictor)")
            elif not os.path.isfile(path):
                self.problems.append(f"{kpath}: {field} {ref} does not exist")
            else:
                self.files.add(path)
                return path
            return None

        for field in ("resources", "components"):
            for ref in k.get(field, []):
                path = os.path.realpath(os.path.join(root, ref))
                if os.path.isdir(path):
                    # A base or component: kustomize refuses one at or above a root it is building.
                    if any(inside(v, path) for v in visiting + [root]):
                        self.problems.append(f"{kpath}: {field} {ref} contains {root} (kustomize: cycle)")
                    else:
                        self._load(path, visiting + [root])
                elif field == "components":
                    self.problems.append(f"{kpath}: component {ref} is not a directory")
                elif (path := file_ref(field, ref)) is not None:
                    for d in load_yaml(path, self.problems):
                        if not (isinstance(d, dict) and d.get("apiVersion") and d.get("kind")
                                and d.get("metadata", {}).get("name")):
                            self.problems.append(f"{path}: a document without apiVersion, kind or name")
                        else:
                            self.objects.append(d)
        for gen in k.get("configMapGenerator", []) + k.get("secretGenerator", []):
            for ref in gen.get("files", []) + gen.get("envs", []):
                path = file_ref("generator file", ref.split("=", 1)[-1])  # "key=path" or "path"
                if path and path.endswith((".yaml", ".yml")):
                    load_yaml(path, self.problems)
        for gen in k.get("configMapGenerator", []):
            self.objects.append({"kind": "ConfigMap", "metadata": {
                "name": gen["name"], "namespace": gen.get("namespace") or k.get("namespace")}})
        for patch in k.get("patches", []):
            if "path" in patch:
                file_ref("patch", patch["path"])

    def daemonsets(self):
        """Each DaemonSet, by the gpuslice subcommand of its first container."""
        out = {}
        for o in self.objects:
            if o["kind"] == "DaemonSet":
                args = o["spec"]["template"]["spec"]["containers"][0].get("args") or [""]
                out[args[0]] = o["metadata"]["name"]
        return out


class KustomizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.installs = {name: Install(os.path.join(DEPLOY, d)) for name, d in INSTALLS.items()}

    def test_paths_exist_stay_inside_and_parse(self):
        for name, install in self.installs.items():
            if install.problems:
                self.fail(f"install {name}:\n  " + "\n  ".join(install.problems))

    def test_never_both_plugins_in_one_install(self):
        for name, install in self.installs.items():
            plugins = install.daemonsets()
            self.assertFalse("device-plugin" in plugins and "dra-plugin" in plugins,
                             f"install {name} deploys {plugins}: the two plugins are alternatives")
        self.assertIn("device-plugin", self.installs["classic"].daemonsets())
        self.assertIn("dra-plugin", self.installs["dra"].daemonsets())

    def test_every_install_manifest_belongs_to_an_install(self):
        used = set().union(*(i.files for i in self.installs.values()))
        for d, _, files in os.walk(DEPLOY):
            for f in files:
                path = os.path.realpath(os.path.join(d, f))
                if f.endswith((".yaml", ".yml")) and "example" not in f and path not in used:
                    self.fail(f"{path} is in no kustomization (or name it *example*)")

    def test_each_install_brings_what_its_objects_use(self):
        for name, install in self.installs.items():
            have = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in install.objects}
            namespaces = {n for k, _, n in have if k == "Namespace"} | BUILTIN_NAMESPACES
            for o in install.objects:
                ns = o["metadata"].get("namespace")
                what = f"install {name}: {o['kind']} {o['metadata']['name']}"
                if o["kind"] in CLUSTER_SCOPED:
                    continue
                self.assertIn(ns, namespaces, what + ": its namespace is not created")
                for kpath, override in install.namespace_overrides:
                    self.assertEqual(ns, override, f"{what}: {kpath}'s namespace: would move it")
                pod = o.get("spec", {}).get("template", {}).get("spec")
                if pod is None:
                    continue
                self.assertIn(("ServiceAccount", ns, pod.get("serviceAccountName")), have, what)
                for v in pod.get("volumes", []):
                    if "configMap" in v:
                        self.assertIn(("ConfigMap", ns, v["configMap"]["name"]), have, what)
                for c in pod.get("initContainers", []) + pod["containers"]:
                    image = c["image"].split("@")[0]
                    if ":" in image.rsplit("/", 1)[-1]:
                        image = image.rsplit(":", 1)[0]
                    if image.startswith(GPUSLICE_IMAGE_PREFIX):
                        self.assertIn(image, install.images, f"{what}: no images: entry sets {image}")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + ["-v"])
