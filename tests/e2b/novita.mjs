// Novita's JS SDK (novita-sandbox, E2B's protocol with its own variables and paths: create is
// POST /sandboxes, the data plane is routed by Novita-Sandbox-Id/-Port headers): the core flow.
// Env: NOVITA_API_URL, NOVITA_SANDBOX_URL, NOVITA_API_KEY.
import { Sandbox, NotFoundError, AuthenticationError, CommandExitError } from "novita-sandbox";
import { check, assert, eq, throwsA, atEnd, done, RUN } from "./lib.mjs";

let sb;
atEnd(async () => {
        if (sb) await Sandbox.kill(sb.sandboxId).catch(() => {});
});
const UNKNOWN = "ffffffffffffffffffffffffffffffff";
const listAll = async (opts) => {
        const p = Sandbox.list(opts), out = [];
        for (let i = 0; p.hasNext && i < 10; i++) out.push(...(await p.nextItems()));
        return out;
};

await check("novita_create_with_metadata_and_envs", async () => {
        sb = await Sandbox.create({ metadata: { run: RUN, sdk: "novita" }, envs: { WHO: "novita" }, timeoutMs: 120000 });
        assert(/^\S+$/.test(sb.sandboxId), `sandboxId '${sb.sandboxId}'`);
}, 60000);

await check("novita_commands_run", async () => {
        const r = await sb.commands.run("echo $WHO; echo err >&2; pwd; whoami");
        eq(["novita\n/home/user\nuser\n", "err\n", 0], [r.stdout, r.stderr, r.exitCode], "stdout, stderr, exitCode");
        const e = await throwsA(CommandExitError, () => sb.commands.run("exit 4"), "exit 4");
        eq(4, e.exitCode, "exitCode of the error");
});

await check("novita_files_write_read_list", async () => {
        await sb.files.write("/home/user/n.txt", "from novita\n");
        eq("from novita\n", await sb.files.read("/home/user/n.txt"), "read back");
        assert((await sb.files.list("/home/user")).some((e) => e.name === "n.txt"), "n.txt in the listing of /home/user");
});

await check("novita_get_info_and_list", async () => {
        const info = await Sandbox.getInfo(sb.sandboxId);
        eq([sb.sandboxId, { run: RUN, sdk: "novita" }, "running"], [info.sandboxId, info.metadata, info.state], "sandboxId, metadata, state");
        eq([sb.sandboxId], (await listAll({ query: { metadata: { run: RUN } } })).map((s) => s.sandboxId), "listed with its metadata");
});

await check("novita_connect", async () => {
        const c = await Sandbox.connect(sb.sandboxId);
        eq("again\n", (await c.commands.run("echo again")).stdout, "a command through the connected sandbox");
});

await check("novita_errors", async () => {
        await throwsA(NotFoundError, () => Sandbox.connect(UNKNOWN), "Sandbox.connect(unknown)");
        eq(false, await Sandbox.kill(UNKNOWN), "Sandbox.kill(unknown)");
        await throwsA(AuthenticationError, () => Sandbox.create({ apiKey: "e2b_" + "0".repeat(40) }), "Sandbox.create with a bad key");
});

await check("novita_kill", async () => {
        eq(true, await Sandbox.kill(sb.sandboxId), "Sandbox.kill");
        await throwsA(NotFoundError, () => Sandbox.getInfo(sb.sandboxId), "getInfo after kill");
        sb = undefined;
});

await done();
