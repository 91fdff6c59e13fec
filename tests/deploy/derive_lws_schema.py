#!/usr/bin/python3
"""Derives the JSON schema that validate_manifests.mjs checks LeaderWorkerSet objects against,
from the upstream LeaderWorkerSet CRD (kubernetes-sigs/lws,
config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml, Apache-2.0):

  derive_lws_schema.py CRD.yaml SOURCE_NOTE > tests/deploy/schemas/leaderworkerset-v1.json

The CRD's openAPIV3Schema for v1 is kept field for field (types, enums, required, bounds),
with three changes:
  - descriptions are dropped (size), and OpenAPI-only keywords that JSON schema validators do
    not know are mapped (format int32 -> its bounds, int-or-string -> anyOf) or dropped;
  - every object that lists its properties and allows nothing else upstream gets
    additionalProperties: false, so a misspelt field fails instead of being pruned silently by
    the API server;
  - the two pod templates (leaderTemplate, workerTemplate) and volumeClaimTemplates become
    placeholders ("x-splitspec-validate": the kubernetes-models class to check them with), so
    the pod specs are checked by the same Kubernetes schemas as every other workload.
"""
import json
import sys

import yaml

PLACEHOLDERS = {
    "leaderTemplate": {"type": "object", "x-splitspec-validate": "PodTemplateSpec"},
    "workerTemplate": {"type": "object", "x-splitspec-validate": "PodTemplateSpec"},
    "volumeClaimTemplates": {"type": "array",
                             "items": {"type": "object", "x-splitspec-validate": "PersistentVolumeClaim"}},
}


def convert(node, name=None):
    if name in PLACEHOLDERS:
        return PLACEHOLDERS[name]
    if isinstance(node, list):
        return [convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("description", "format") or key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {field: convert(schema, field) for field, schema in value.items()}
        else:
            out[key] = convert(value)
    if node.get("format") == "int32":
        out.setdefault("minimum", -2**31)
        out.setdefault("maximum", 2**31 - 1)
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def main():
    crd = yaml.safe_load(open(sys.argv[1]))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = convert(version["schema"]["openAPIV3Schema"])
    schema["properties"].pop("status", None)  # written by the controller, never by us
    schema["$comment"] = (f"Derived by tests/deploy/derive_lws_schema.py from {sys.argv[2]} "
                          "(kubernetes-sigs/lws, Apache-2.0).")
    json.dump(schema, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
