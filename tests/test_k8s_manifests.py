#!/usr/bin/env python3
"""The manifests of deploy/k8s/ against DI-orchestrator v0.2.2's CRDs, with
strict field validation (deploy/validate_k8s.py): ours and DI-orchestrator's
own samples pass; a misspelled field, a wrong type, a field the API server
would prune and an unknown version each fail, at the right line.

usage: test_k8s_manifests.py SOURCE_DIR CRD_DIR
Exit 77 (skipped) without python3-yaml / python3-jsonschema or CRD_DIR.
"""
import glob
import importlib.util
import io
import os
import subprocess
import sys
import tempfile

src, crds = sys.argv[1], sys.argv[2]
try:
    import jsonschema  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print(f"SKIP: needs python3-yaml and python3-jsonschema: {e}")
    sys.exit(77)
if not os.path.isdir(crds):
    print(f"SKIP: no DI-orchestrator v0.2.2 CRDs at {crds} (set -DDI_ORCHESTRATOR_CRDS=DIR; they are data, "
          "never in this tree)")
    sys.exit(77)

tool = os.path.join(src, "deploy", "validate_k8s.py")
spec = importlib.util.spec_from_file_location("validate_k8s", tool)
vk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vk)
schemas = vk.load_crds(crds)
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1


def errors_of(path):
    out = io.StringIO()
    n = vk.validate_file(path, schemas, out)
    return n, out.getvalue()


check(("diengine.opendilab.org/v1alpha1", "DIJob") in schemas
      and ("diengine.opendilab.org/v1alpha1", "AggregatorConfig") in schemas,
      f"the CRDs in {crds} give DIJob and AggregatorConfig v1alpha1")

ours = sorted(glob.glob(os.path.join(src, "deploy", "k8s", "*.yaml")))
kinds = set()
for m in ours:
    n, text = errors_of(m)
    check(n == 0, f"{os.path.relpath(m, src)} validates" + ("" if n == 0 else ":\n" + text))
    with open(m) as f:
        kinds |= {d["kind"] for d in yaml.safe_load_all(f) if d}
check(len(ours) >= 3 and {"AggregatorConfig", "DIJob", "ConfigMap"} <= kinds,
      f"deploy/k8s holds an AggregatorConfig, DIJobs and the mock job's ConfigMap ({len(ours)} files)")

samples = [p for p in sorted(glob.glob(os.path.join(crds, "*.yaml")))
           if not os.path.basename(p).startswith("diengine.opendilab.org_")]
for m in samples:
    n, text = errors_of(m)
    check(n == 0, f"DI-orchestrator's sample {os.path.basename(m)} validates" + ("" if n == 0 else ":\n" + text))
check(len(samples) >= 4, f"{len(samples)} DI-orchestrator samples checked")


def mutated(name, old, new, want, line_of=None):
    """Replaces old by new (once) in deploy/k8s/NAME; every string of want
    must be in the errors, at the line of line_of (default: new)."""
    with open(os.path.join(src, "deploy", "k8s", name)) as f:
        text = f.read()
    assert text.count(old) >= 1, f"{name}: no {old!r} to change"
    text = text.replace(old, new, 1)
    line = text[:text.index(line_of or new)].count("\n") + 1
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    n, out = errors_of(f.name)
    ok = n >= 1 and all(w in out for w in want) and f"{f.name}:{line}:" in out
    check(ok, f"{name} with {new.strip()!r} fails at line {line}: " + out.strip().replace(f.name, "<file>"))
    os.unlink(f.name)


mutated("aggregatorconfig.yaml", "imagePullPolicy:", "imagePulPolicy:",
        ["spec.aggregator.template.spec.containers[0].imagePulPolicy: unknown field",
         "did you mean imagePullPolicy?"])
mutated("aggregatorconfig.yaml", "path: /metrics", "paht: /metrics",
        ["containers[0].readinessProbe.httpGet.paht: unknown field", "did you mean path?"])
mutated("aggregatorconfig.yaml", "  aggregator:\n", "  aggregatr:\n",
        ["spec.aggregatr: unknown field", "did you mean aggregator?", "'aggregator' is a required property"])
mutated("aggregatorconfig.yaml", "  namespace: di-system", "  namespce: di-system",
        ["metadata.namespce: unknown field", "did you mean namespace?"])
mutated("mock-dijob.yaml", "cleanPodPolicy: Running", "cleanPodPolcy: Running",
        ["DIJob spec.cleanPodPolcy: unknown field", "did you mean cleanPodPolicy?"])
mutated("mock-dijob.yaml", "restartPolicy: Never", "restartPolicyy: Never",
        ["coordinator.template.spec.restartPolicyy: unknown field", "did you mean restartPolicy?"])
mutated("mock-dijob.yaml", "containerPort: 22390", "containerPort: \"22390\"",
        ["ports[1].containerPort: '22390' is not of type 'integer'"])
mutated("mock-dijob.yaml", "    template:\n      spec:\n        restartPolicy: Never",
        "    template:\n      metadata:\n        labels: {app: x}\n      spec:\n        restartPolicy: Never",
        ["coordinator.template.metadata.labels: unknown field", "the API server would drop it"],
        line_of="        labels: {app: x}")
mutated("mock-dijob.yaml", "kind: DIJob", "kind: DIJobs",
        ["DIJobs kind: no schema for apiVersion 'diengine.opendilab.org/v1alpha1' kind 'DIJobs'"])
mutated("mock-dijob.yaml", "  script.json: |", "  script.json: 3\n  other: |",
        ["ConfigMap data.script.json: 3 is not of type 'string'"], line_of="  script.json: 3")

# x-kubernetes-preserve-unknown-fields and maps take any key (a made-up CRD:
# DI-orchestrator's have neither kind of object outside the pod schema).
with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "crd.yaml"), "w") as f:
        yaml.safe_dump({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                        "spec": {"group": "t.example", "names": {"kind": "T"}, "versions": [{
                            "name": "v1", "served": True, "schema": {"openAPIV3Schema": {
                                "type": "object", "properties": {
                                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                    "metadata": {"type": "object"},
                                    "spec": {"type": "object", "properties": {
                                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                        "map": {"type": "object", "additionalProperties": {"type": "integer"}},
                                        "closed": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}}}}]}}, f)
    with open(os.path.join(d, "t.yaml"), "w") as f:
        f.write("apiVersion: t.example/v1\nkind: T\nmetadata: {name: t}\n"
                "spec:\n  free: {anything: [1, {deep: x}]}\n  map: {k1: 1, k2: 2}\n  closed: {a: 1}\n")
    with open(os.path.join(d, "bad.yaml"), "w") as f:
        f.write("apiVersion: t.example/v1\nkind: T\nmetadata: {name: t}\n"
                "spec:\n  map: {k1: one}\n  closed: {a: 1, b: 2}\n")
    r = subprocess.run([sys.executable, tool, "--crds", d, os.path.join(d, "t.yaml")], capture_output=True, text=True)
    check(r.returncode == 0, f"preserve-unknown-fields and maps take any key (exit {r.returncode}) {r.stderr.strip()}")
    r = subprocess.run([sys.executable, tool, "--crds", d, os.path.join(d, "bad.yaml")], capture_output=True, text=True)
    check(r.returncode == 1 and "bad.yaml:5: T spec.map.k1: 'one' is not of type 'integer'" in r.stderr
          and "bad.yaml:6: T spec.closed.b: unknown field \"b\"" in r.stderr,
          f"a map's values are checked, a closed object's keys too (exit {r.returncode}): {r.stderr.strip()}")

print(f"{fails} failure(s)")
sys.exit(1 if fails else 0)
