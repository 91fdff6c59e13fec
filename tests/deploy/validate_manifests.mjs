// Validates rendered Kubernetes documents (a JSON array on stdin) against the OpenAPI schemas
// of Kubernetes and of the CRDs we use (KEDA, Prometheus Operator, cert-manager), offline, with the
// kubernetes-models packages. Prints one line per document; exits 1 if any is invalid or of a
// kind no schema package covers.
// Usage: node validate_manifests.mjs NODE_MODULES_DIR < documents.json
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const modules = process.argv[2];
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
