// Validates Kubernetes objects against the API's schemas with kubernetes-models (the
// OpenAPI schemas of the Kubernetes API, compiled) and, for the Prometheus operator's
// kinds, @kubernetes-models/prometheus-operator: an independent check of what
// `helm template` prints.
//
//   node validate.js < DOCS.json      (a JSON array of objects)
//
// Prints one line per object: "ok KIND NAME", "invalid KIND NAME: REASONS" or
// "unknown KIND NAME: no schema for API_VERSION"; exits 1 when any object is invalid or
// has no schema. The schemas check types, required fields, enums and formats; they do
// not reject unknown fields.
"use strict";

const fs = require("fs");

// apiVersion -> the module holding its kinds.
function moduleFor(apiVersion) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return "@kubernetes-models/prometheus-operator/" + apiVersion;
  }
  return "kubernetes-models/" + apiVersion;  // "v1" is the core group
}

function main() {
  const docs = JSON.parse(fs.readFileSync(0, "utf8"));
  let failed = 0;
  for (const doc of docs) {
    const kind = doc && doc.kind;
    const apiVersion = doc && doc.apiVersion;
    const name = (doc && doc.metadata && doc.metadata.name) || "(no name)";
    let Model;
    try {
      Model = require(moduleFor(String(apiVersion)))[kind];
    } catch (e) {
      Model = undefined;
    }
    if (typeof Model !== "function") {
      console.log(`unknown ${kind} ${name}: no schema for ${apiVersion}`);
      failed++;
      continue;
    }
    try {
      new Model(doc).validate();
      console.log(`ok ${kind} ${name}`);
    } catch (e) {
      console.log(`invalid ${kind} ${name}: ${e.message}`);
      failed++;
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
