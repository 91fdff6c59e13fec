// Validates rendered Kubernetes documents (a JSON array on stdin) against the OpenAPI schemas
// of Kubernetes and of the CRDs we use (KEDA, Prometheus Operator, cert-manager), offline, with the
// kubernetes-models packages. LeaderWorkerSet has no such package: its objects are checked with
// ajv against schemas/leaderworkerset-v1.json (derived from the upstream CRD by
// derive_lws_schema.py; unknown fields refused), and the pod templates inside them with
// kubernetes-models' PodTemplateSpec. Prints one line per document; exits 1 if any is invalid
// or of a kind no schema covers.
// Usage: node validate_manifests.mjs NODE_MODULES_DIR < documents.json
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import path from "node:path";

const modules = process.argv[2];
const here = path.dirname(fileURLToPath(import.meta.url));
// apiVersion -> a JSON schema file under schemas/, for CRDs without a kubernetes-models package.
const jsonSchemas = {
  "leaderworkerset.x-k8s.io/v1": "leaderworkerset-v1.json",
};
// ajv comes with kubernetes-models (its validator).
const Ajv = createRequire(path.join(modules, "kubernetes-models", "package.json"))("ajv").default;
const ajv = new Ajv({ strict: false, allErrors: true });

// Fields a derived schema marks "x-splitspec-validate": MODEL are checked with that core model.
function embedded(schema, value, where, out) {
  if (value === undefined || value === null) return;
  if (schema["x-splitspec-validate"]) out.push([schema["x-splitspec-validate"], value, where]);
  if (schema.properties && typeof value === "object") {
    for (const [key, sub] of Object.entries(schema.properties)) embedded(sub, value[key], `${where}.${key}`, out);
  }
  if (schema.items && Array.isArray(value)) value.forEach((v, i) => embedded(schema.items, v, `${where}[${i}]`, out));
}

async function validateWithJsonSchema(doc, file) {
  const schema = JSON.parse(readFileSync(path.join(here, "schemas", file), "utf8"));
  const check = ajv.compile(schema);
  if (!check(doc)) {
    throw new Error(check.errors.map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`).join("; "));
  }
  if (typeof doc.metadata?.name !== "string" || doc.metadata.name === "") throw new Error("metadata.name is required");
  const inner = [];
  embedded(schema, doc, "", inner);
  for (const [kind, value, where] of inner) {
    const Model = await modelFor("v1", kind);
    try {
      new Model(value).validate();
    } catch (error) {
      throw new Error(`${where}: ${error.message}`);
    }
  }
  return inner.length;
}
// apiVersion group -> package holding its models (core and built-in groups: kubernetes-models).
const crdPackages = {
  "keda.sh": "@kubernetes-models/keda",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "cert-manager.io": "@kubernetes-models/cert-manager",
};

async function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const pkg = crdPackages[group] ?? "kubernetes-models";
  const dir = group === "" ? version : `${group}/${version}`;
  const pkgDir = path.join(modules, pkg);
  const file = path.join(pkgDir, dir, `${kind}.js`);
  const module = await import(pathToFileURL(file).href);
  return module[kind];
}

const documents = JSON.parse(readFileSync(0, "utf8"));
let failures = 0;
for (const doc of documents) {
  const name = `${doc.kind}/${doc.metadata?.name} (${doc.apiVersion})`;
  try {
    if (jsonSchemas[doc.apiVersion]) {
      const inner = await validateWithJsonSchema(doc, jsonSchemas[doc.apiVersion]);
      console.log(`valid   ${name} (derived CRD schema; ${inner} embedded object(s) by kubernetes-models)`);
      continue;
    }
    const Model = await modelFor(doc.apiVersion, doc.kind);
    new Model(doc).validate();
    console.log(`valid   ${name}`);
  } catch (error) {
    failures++;
    console.log(`INVALID ${name}: ${error.message}`);
  }
}
console.log(`${documents.length - failures}/${documents.length} documents valid`);
process.exit(failures === 0 ? 0 : 1);
