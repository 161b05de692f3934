// E2B's CLI (@e2b/cli, which bundles its own copy of the e2b SDK): `e2b sandbox list` and
// `e2b sandbox kill ID`, the other sandbox commands, `e2b template list`.  It reads E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL like the SDK; with
// no key it would read ~/.e2b/config.json, so HOME is a scratch directory here, and its npm
// update check is off (NO_UPDATE_NOTIFIER).
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { Sandbox, NotFoundError, Template } from "e2b";
import { check, assert, eq, throwsA, atEnd, done, RUN } from "./lib.mjs";

const require = createRequire(import.meta.url);
const CLI = join(dirname(require.resolve("@e2b/cli/package.json")), "dist", "index.js");
const home = mkdtempSync(join(tmpdir(), "e2b-cli-home."));
let sb;
atEnd(async () => {
        rmSync(home, { recursive: true, force: true });
        if (sb) await sb.kill().catch(() => {});
});

// runs the CLI; resolves to {status, stdout, stderr}
function e2b(...args) {
        const env = { ...process.env, HOME: home, NO_UPDATE_NOTIFIER: "1", FORCE_COLOR: "0", NO_COLOR: "1" };
        return new Promise((resolve) => {
                const child = execFile(process.execPath, [CLI, ...args], { env, timeout: 25000 }, (err, stdout, stderr) => {
                        resolve({ status: err ? (err.code ?? err.signal) : 0, stdout, stderr });
                });
                child.stdin.end(); /* `e2b sandbox exec` sends a piped stdin to the command, to its end */
        });
}
const show = (r) => `status ${r.status}, stdout ${JSON.stringify(r.stdout).slice(0, 300)}, stderr ${JSON.stringify(r.stderr).slice(0, 300)}`;

await check("cli_runs", async () => {
        const r = await e2b("--version");
        eq(0, r.status, "e2b --version: " + show(r));
});

await check("create_a_sandbox", async () => {
        sb = await Sandbox.create({ metadata: { run: RUN, via: "cli" } });
}, 60000);

await check("cli_sandbox_list", async () => {
        const j = await e2b("sandbox", "list", "--format", "json", "--metadata", `run=${RUN}`);
        eq(0, j.status, "e2b sandbox list --format json: " + show(j));
        const list = JSON.parse(j.stdout);
        eq([sb.sandboxId], list.map((s) => s.sandboxId), "sandboxes in the JSON list");
        eq([{ run: RUN, via: "cli" }, "running", "base"], [list[0].metadata, list[0].state, list[0].templateId], "metadata, state, templateId");
        const p = await e2b("sandbox", "list");
        eq(0, p.status, "e2b sandbox list: " + show(p));
        assert(p.stdout.includes(sb.sandboxId), "the table of e2b sandbox list does not show the sandbox: " + show(p));
        assert(p.stdout.includes("Running"), "the table of e2b sandbox list shows no Running state: " + show(p));
});

// the rest of the sandbox commands a user reaches for: info, exec, metrics, pause, resume, logs
await check("cli_sandbox_info_exec_metrics_pause_resume_logs", async () => {
        const id = sb.sandboxId;
        const info = await e2b("sandbox", "info", id);
        assert(info.status === 0 && info.stdout.includes("State: running"), "e2b sandbox info: " + show(info));
        const ex = await e2b("sandbox", "exec", id, "echo", "from-the-cli");
        eq([0, "from-the-cli\n"], [ex.status, ex.stdout], "e2b sandbox exec: " + show(ex));
        const m = await e2b("sandbox", "metrics", id);
        assert(m.status === 0 && /CPU:.*Memory:.*Disk:/.test(m.stdout), "e2b sandbox metrics: " + show(m));
        const p = await e2b("sandbox", "pause", id);
        assert(p.status === 0 && p.stdout.includes("has been paused"), "e2b sandbox pause: " + show(p));
        eq("paused", (await Sandbox.getInfo(id)).state, "the state after e2b sandbox pause");
        const r = await e2b("sandbox", "resume", id);
        assert(r.status === 0 && r.stdout.includes("has been resumed"), "e2b sandbox resume: " + show(r));
        const l = await e2b("sandbox", "logs", "--format", "json", id);
        eq(0, l.status, "e2b sandbox logs: " + show(l));
        const lines = l.stdout.split("\n").filter((x) => x.startsWith("{")).map((x) => JSON.parse(x));
        const events = lines.map((x) => x.event);
        for (const e of ["sandbox.created", "process.started", "sandbox.paused", "sandbox.resumed"])
                assert(events.includes(e), `e2b sandbox logs has no ${e}: ` + show(l));
        assert(lines.some((x) => x.message.includes("echo from-the-cli")), "the logs do not name the command: " + show(l));
}, 60000);

// `e2b template list`, and Template.exists() of the SDK: the templates a create takes
await check("cli_template_list_and_exists", async () => {
        const j = await e2b("template", "list", "--format", "json");
        eq(0, j.status, "e2b template list --format json: " + show(j));
        const ids = JSON.parse(j.stdout).map((t) => t.templateID);
        assert(ids.includes("base") && ids.includes("code-interpreter-v1"), "e2b template list: " + show(j));
        const p = await e2b("template", "list");
        assert(p.status === 0 && /Public\s+base\s/.test(p.stdout), "the table of e2b template list: " + show(p));
        eq([true, true, false], [await Template.exists("base"), await Template.exists("code-interpreter"), await Template.exists("no-such")],
           "Template.exists");
});

await check("cli_sandbox_kill", async () => {
        const r = await e2b("sandbox", "kill", sb.sandboxId);
        eq(0, r.status, "e2b sandbox kill: " + show(r));
        assert(r.stdout.includes(`Sandbox ${sb.sandboxId} has been killed`), "e2b sandbox kill's message: " + show(r));
        await throwsA(NotFoundError, () => Sandbox.getInfo(sb.sandboxId), "getInfo after e2b sandbox kill");
        const again = await e2b("sandbox", "kill", sb.sandboxId);
        assert(again.stderr.includes(`Sandbox ${sb.sandboxId} wasn't found`), "a second kill: " + show(again));
        sb = undefined;
        const none = await e2b("sandbox", "list", "--format", "json", "--metadata", `run=${RUN}`);
        eq("[]", JSON.stringify(JSON.parse(none.stdout)), "the list after kill: " + show(none));
});

await check("cli_bad_key_fails", async () => {
        const saved = process.env.E2B_API_KEY;
        process.env.E2B_API_KEY = "e2b_" + "0".repeat(40);
        try {
                const r = await e2b("sandbox", "list");
                assert(r.status !== 0, "e2b sandbox list with a bad key succeeded: " + show(r));
                assert(/AuthenticationError|Unauthorized/.test(r.stderr), "the error of a bad key: " + show(r));
        } finally {
                process.env.E2B_API_KEY = saved;
        }
});

await done();
