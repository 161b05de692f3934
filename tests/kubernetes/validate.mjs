// Validates Kubernetes manifests offline against the Kubernetes schemas of the pinned
// kubernetes-models package, strictly: a field the schema does not know fails too, as
// `kubectl apply --validate=strict` would on a cluster.
//   node validate.mjs FILE.yaml...        one line per resource; exit status 1 on any error
//   node validate.mjs --get FILE KEY      print data[KEY] of the ConfigMap in FILE
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { parseAllDocuments } from "yaml";

// The compiled schema validators read every property they know; a property of an object never
// read (and whose keys were never listed, as a map's are) is one the schema does not have.
function tracked(value, seen) {
        if (value === null || typeof value !== "object")
                return value;
        const info = { read: new Set(), listed: false };
        seen.set(value, info);
        return new Proxy(value, {
                get(target, key, receiver) {
                        if (typeof key === "string")
                                info.read.add(key);
                        return tracked(Reflect.get(target, key, receiver), seen);
                },
                has(target, key) {
                        if (typeof key === "string")
                                info.read.add(key);
                        return Reflect.has(target, key);
                },
                ownKeys(target) {
                        info.listed = true;
                        return Reflect.ownKeys(target);
                },
        });
}

function unknownFields(value, seen, path, out) {
        if (value === null || typeof value !== "object")
                return out;
        const info = seen.get(value);
        if (!info)
                return out;
        for (const [k, v] of Object.entries(value)) {
                const p = Array.isArray(value) ? `${path}[${k}]` : `${path}.${k}`;
                if (!Array.isArray(value) && !info.listed && !info.read.has(k))
                        out.push(p.slice(1));
                else
                        unknownFields(v, seen, p, out);
        }
        return out;
}

async function modelOf(doc) {
        const { apiVersion, kind } = doc ?? {};
        if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[a-z0-9.]*\/?v[0-9a-z]+$/.test(apiVersion))
                throw new Error("no apiVersion and kind");
        let mod;
        try {
                mod = await import(`kubernetes-models/${apiVersion}`);
        } catch {
                throw new Error(`unknown apiVersion '${apiVersion}'`);
        }
        if (typeof mod[kind] !== "function")
                throw new Error(`unknown kind '${kind}' in ${apiVersion}`);
        return mod[kind];
}

// kustomize's own file is no API resource: it must name every other manifest beside it, and
// only those.
const KUSTOMIZE_KEYS = ["apiVersion", "kind", "resources", "namespace", "images", "labels", "patches"];

function checkKustomization(file, doc) {
        const extra = Object.keys(doc).filter((k) => !KUSTOMIZE_KEYS.includes(k));
        if (extra.length)
                throw new Error(`unknown or unused field: ${extra.join(", ")}`);
        const listed = doc.resources ?? [];
        const missing = listed.filter((r) => !existsSync(join(dirname(file), r)));
        if (missing.length)
                throw new Error(`resources that do not exist: ${missing.join(", ")}`);
        const here = readdirSync(dirname(file)).filter((f) => /\.ya?ml$/.test(f) && f !== basename(file));
        const unlisted = here.filter((f) => !listed.includes(f));
        if (unlisted.length)
                throw new Error(`manifests not in resources: ${unlisted.join(", ")}`);
}

async function check(file, doc) {
        if (doc?.apiVersion === "kustomize.config.k8s.io/v1beta1" && doc?.kind === "Kustomization")
                return checkKustomization(file, doc);
        const Model = await modelOf(doc);
        const plain = new Model(doc).toJSON();
        const seen = new WeakMap();
        const problems = [];
        try {
                Model.prototype.validate.call(tracked(plain, seen));
        } catch (e) {
                problems.push(e.message.split("\n").join("; "));
        }
        const extra = unknownFields(plain, seen, "", []);
        if (extra.length)
                problems.push(`unknown field${extra.length > 1 ? "s" : ""}: ${extra.join(", ")}`);
        if (problems.length)
                throw new Error(problems.join("; "));
}

function documents(file) {
        const docs = parseAllDocuments(readFileSync(file, "utf8"), { prettyErrors: false });
        if (!Array.isArray(docs))
                return [];
        for (const d of docs)
                if (d.errors.length)
                        throw new Error(`${basename(file)}: YAML: ${d.errors[0].message}`);
        return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

const args = process.argv.slice(2);
if (args[0] === "--get") {
        const cm = documents(args[1]).find((d) => d.kind === "ConfigMap" && d.data && args[2] in d.data);
        if (!cm) {
                console.error(`${args[1]}: no ConfigMap with data['${args[2]}']`);
                process.exit(1);
        }
        process.stdout.write(cm.data[args[2]]);
        process.exit(0);
}
let bad = 0;
for (const file of args) {
        let docs;
        try {
                docs = documents(file);
        } catch (e) {
                console.log(`FAIL ${e.message}`);
                bad++;
                continue;
        }
        if (!docs.length) {
                console.log(`FAIL ${basename(file)}: no resource`);
                bad++;
        }
        for (const doc of docs) {
                const what = `${basename(file)}: ${doc?.kind}${doc?.metadata?.name ? "/" + doc.metadata.name : ""}`;
                try {
                        await check(file, doc);
                        console.log(`ok ${what}`);
                } catch (e) {
                        console.log(`FAIL ${what}: ${e.message}`);
                        bad++;
                }
        }
}
process.exit(bad ? 1 : 0);
