#!/usr/bin/env python3
"""Validates Kubernetes manifests against CustomResourceDefinitions, strictly,
the way the API server's strict field validation (kubectl apply
--validate=strict) does, without a cluster.

usage: deploy/validate_k8s.py --crds DIR MANIFEST...

DIR holds the CRDs (e.g. DI-orchestrator v0.2.2's
diengine.opendilab.org_aggregatorconfigs.yaml and _dijobs.yaml). Every
document of every MANIFEST must be one of their kinds (or a ConfigMap) and
validate against the schema of its version:

- types, required fields, enums, patterns, int-or-string: JSON Schema
  (python3-jsonschema) on the CRD's openAPIV3Schema;
- unknown fields: an object takes only its declared properties, unless it
  has additionalProperties (a map: any key, values checked) or
  x-kubernetes-preserve-unknown-fields. An object schema without either and
  without properties takes no field at all: the API server prunes them all
  (DI-orchestrator's CRDs declare pod templates' metadata so), and strict
  validation reports each as unknown. The root metadata is ObjectMeta,
  which the API server checks itself: checked here against its fields.

Errors: FILE:LINE: PATH: what is wrong (did you mean ...?). Exit 0 all valid,
1 an error, 2 bad usage or unreadable input.
"""
import argparse
import difflib
import os
import sys

try:
    import jsonschema
    import yaml
except ImportError as e:  # the ctest wrapper turns this into a skip
    print(f"validate_k8s: needs python3-yaml and python3-jsonschema ({e})", file=sys.stderr)
    sys.exit(77)

# ObjectMeta fields a manifest may set (k8s.io/apimachinery meta/v1).
OBJECT_META = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        # set by the server, found in manifests exported from a cluster
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": "string"},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "selfLink": {"type": "string"},
    },
}

# The core kinds a manifest of deploy/k8s/ may hold besides the CRDs' kinds.
CONFIG_MAP = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"enum": ["v1"]},
        "kind": {"enum": ["ConfigMap"]},
        "metadata": OBJECT_META,
        "data": {"type": "object", "additionalProperties": {"type": "string"}},
        "binaryData": {"type": "object", "additionalProperties": {"type": "string"}},
        "immutable": {"type": "boolean"},
    },
}
CORE = {("v1", "ConfigMap"): CONFIG_MAP}


def load_crds(folder):
    """(apiVersion, kind) -> schema of every served version of every CRD."""
    schemas = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(folder, name)) as f:
            for doc in yaml.safe_load_all(f):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for v in spec["versions"]:
                    if not v.get("served", True):
                        continue
                    s = v["schema"]["openAPIV3Schema"]
                    schemas[(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = s
    return schemas


class Located:
    """Line numbers of a YAML document's nodes, by path."""

    def __init__(self, node):
        self.lines = {}
        self._walk(node, ())

    def _walk(self, node, path):
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                self.lines[path + (k.value, "<key>")] = k.start_mark.line + 1
                self._walk(v, path + (k.value,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, path + (i,))

    def line(self, path, key=False):
        path = tuple(path)
        if key and path + ("<key>",) in self.lines:
            return self.lines[path + ("<key>",)]
        while path not in self.lines:
            path = path[:-1]
        return self.lines[path]


def dotted(path):
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p))
    return out or "(document)"


def unknown_fields(value, schema, path, errors):
    """Strict field validation: the fields the API server would drop."""
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            if props and k in props:
                unknown_fields(v, props[k], path + [k], errors)
            elif isinstance(extra, dict):
                unknown_fields(v, extra, path + [k], errors)
            elif extra is True:
                continue
            elif schema.get("type", "object") == "object" and not schema.get("anyOf"):
                near = difflib.get_close_matches(str(k), list(props or ()), n=1, cutoff=0.6)
                if near:
                    hint = f" (did you mean {near[0]}?)"
                elif props:
                    hint = ""
                else:
                    hint = " (the schema declares no fields here: the API server would drop it)"
                errors.append((path + [k], True, f"unknown field \"{k}\"{hint}"))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            unknown_fields(v, schema["items"], path + [i], errors)


def validate_doc(doc, schemas):
    """[(path, at_key, message)] for one manifest document."""
    if not isinstance(doc, dict):
        return [([], False, "a manifest must be a mapping")]
    key = (doc.get("apiVersion"), doc.get("kind"))
    schema = schemas.get(key) or CORE.get(key)
    if schema is None:
        known = ", ".join(f"{k} ({a})" for a, k in sorted(set(schemas) | set(CORE)))
        return [(["kind"], False, f"no schema for apiVersion {key[0]!r} kind {key[1]!r}; known: {known}")]
    if "properties" in schema and "metadata" in schema["properties"]:
        schema = dict(schema, properties=dict(schema["properties"], metadata=OBJECT_META))
    errors = []
    unknown_fields(doc, schema, [], errors)
    v = jsonschema.Draft7Validator(schema)
    for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        errors.append((list(e.absolute_path), False, e.message))
    if not doc.get("metadata", {}).get("name"):
        errors.append((["metadata"], False, "name is required"))
    return errors


def validate_file(path, schemas, out=sys.stderr):
    """Number of errors in one file (printed as FILE:LINE: PATH: message)."""
    try:
        with open(path) as f:
            text = f.read()
        nodes = list(yaml.compose_all(text))
        docs = list(yaml.safe_load_all(text))
    except (OSError, yaml.YAMLError) as e:
        print(f"{path}: {e}", file=out)
        return 1
    found = []
    for node, doc in zip(nodes, docs):
        if doc is None:
            continue
        where = Located(node)
        kind = doc.get("kind", "?") if isinstance(doc, dict) else "?"
        for p, at_key, msg in validate_doc(doc, schemas):
            found.append((where.line(p, at_key), f"{kind} {dotted(p)}: {msg}"))
    for line, msg in sorted(found):
        print(f"{path}:{line}: {msg}", file=out)
    return len(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crds", required=True, help="folder of CustomResourceDefinition YAML files")
    ap.add_argument("manifests", nargs="+")
    a = ap.parse_args()
    try:
        schemas = load_crds(a.crds)
    except (OSError, yaml.YAMLError, KeyError) as e:
        print(f"validate_k8s: cannot read the CRDs in {a.crds}: {e}", file=sys.stderr)
        return 2
    if not schemas:
        print(f"validate_k8s: no CustomResourceDefinition in {a.crds}", file=sys.stderr)
        return 2
    bad = 0
    for m in a.manifests:
        n = validate_file(m, schemas)
        print(f"{m}: {'valid' if n == 0 else f'{n} error(s)'}")
        bad += n
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
