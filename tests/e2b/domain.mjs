// The SDKs as E2B's own hosts look to them: only E2B_DOMAIN (NOVITA_DOMAIN) and a key set, so
// every URL is https://api.DOMAIN or https://PORT-ID.DOMAIN, through nginx (contrib/) to nsboxd,
// which routes by the Host header.  tests/integration/http_tls.sh runs it, with a certificate
// for *.DOMAIN (NODE_EXTRA_CA_CERTS) and the names resolved to the loopback (dns-hook.mjs):
// commands, files, a web preview at getHost(port) with no header at all, a signed download URL,
// the code interpreter's runCode and contexts, and Novita's code interpreter.
import { Sandbox } from "e2b";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { check, assert, eq, atEnd, done, until, RUN } from "./lib.mjs";

const made = [];
atEnd(async () => {
        for (const k of made) await k().catch(() => {});
});
const DOMAIN = process.env.E2B_DOMAIN;
let sb;

await check("create_run_and_files_by_domain", async () => {
        sb = await Sandbox.create({ metadata: { run: RUN } });
        made.push(() => sb.kill());
        eq(DOMAIN, sb.sandboxDomain ?? DOMAIN, "the sandbox's domain");
        eq("by domain\n", (await sb.commands.run("echo by domain")).stdout, "a command");
        await sb.files.write("notes.txt", "over TLS\n");
        eq("over TLS\n", await sb.files.read("notes.txt"), "a file");
}, 60000);

await check("web_preview_at_get_host_with_no_header", async () => {
        await sb.commands.run("cd /tmp && echo preview > index.html && python3 -m http.server 8000", { background: true });
        const host = sb.getHost(8000);
        eq(`8000-${sb.sandboxId}.${DOMAIN}`, host, "getHost(8000)");
        const res = await until(15000, async () => {
                const r = await fetch(`https://${host}/index.html`);
                return r.status === 200 ? r : null;
        });
        eq("preview\n", await res.text(), "the page, as a browser gets it");
}, 60000);

await check("signed_download_url_with_no_header", async () => {
        const res = await fetch(await sb.downloadUrl("/home/user/notes.txt", { useSignatureExpiration: 60 }));
        eq(200, res.status, "the signed URL");
        eq("over TLS\n", await res.text(), "its body");
        eq(401, (await fetch(`https://49983-${sb.sandboxId}.${DOMAIN}/files?path=/home/user/notes.txt`)).status, "the same without a signature");
}, 30000);

await check("code_interpreter_by_domain", async () => {
        const ci = await CodeSandbox.create({ metadata: { run: RUN } });
        made.push(() => ci.kill());
        await ci.runCode("x = 41");
        eq("42", (await ci.runCode("x + 1")).text, "x + 1");
        const c = await ci.createCodeContext({ language: "python" });
        eq("NameError", (await ci.runCode("x", { context: c })).error?.name, "x in a new context");
        await ci.kill();
}, 120000);

await check("novita_code_interpreter_by_domain", async () => {
        const { Sandbox: NSandbox } = await import("novita-sandbox/code-interpreter");
        const n = await NSandbox.create({ metadata: { run: RUN }, timeoutMs: 120000 });
        made.push(() => NSandbox.kill(n.sandboxId));
        await n.runCode("x = 20");
        const e = await n.runCode("print('from novita'); x * 2 + 2");
        eq(["42", ["from novita\n"]], [e.text, e.logs.stdout], "text and stdout");
}, 120000);

await done();
