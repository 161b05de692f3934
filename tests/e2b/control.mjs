// The control plane through the e2b SDK: create, list (metadata filter, paging), connect, getInfo,
// setTimeout, pause and resume, snapshots and forks, kill, and the errors (unknown id, bad key, another user's
// sandbox).  Env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; E2B_OTHER_API_KEY, a key of another
// user of the same nsboxd, when there is one.
import { Sandbox, NotFoundError, AuthenticationError, TimeoutError } from "e2b";
import { check, assert, eq, throwsA, atEnd, done, until, sleep, Skip, RUN } from "./lib.mjs";

const made = new Set();
atEnd(async () => {
        for (const id of made) await Sandbox.kill(id).catch(() => {});
});
const create = async (opts) => {
        const sb = await Sandbox.create(opts);
        made.add(sb.sandboxId);
        return sb;
};
const UNKNOWN = "ffffffffffffffffffffffffffffffff";
const META = { suite: "nsbox e2b", run: RUN, "free key/with=odd chars": "a value, with = & spaces" };
// a page of Sandbox.list, all pages up to max
async function listAll(opts, max = 10) {
        const p = Sandbox.list(opts), out = [];
        for (let i = 0; p.hasNext && i < max; i++) out.push(...(await p.nextItems()));
        return out;
}

let sb, sb2;

await check("create_with_metadata_envs_timeout", async () => {
        const before = Date.now();
        sb = await create({ metadata: META, envs: { GREETING: "hello from envs" }, timeoutMs: 120000 });
        assert(/^\S+$/.test(sb.sandboxId), `sandboxId '${sb.sandboxId}'`);
        const r = await sb.commands.run("echo $GREETING");
        eq("hello from envs\n", r.stdout, "a command sees the sandbox's envs");
        const info = await sb.getInfo();
        eq(META, info.metadata, "metadata kept exactly");
        const left = (info.endAt.getTime() - before) / 1000;
        assert(left > 100 && left < 140, `endAt is ${left} s after create, for a 120 s timeout`);
}, 60000);

await check("get_info_fields", async () => {
        const info = await sb.getInfo();
        eq(sb.sandboxId, info.sandboxId, "sandboxId");
        eq("base", info.templateId, "templateId (the default template)");
        eq("running", info.state, "state");
        assert(info.startedAt instanceof Date && !isNaN(info.startedAt), `startedAt ${info.startedAt}`);
        assert(Math.abs(Date.now() - info.startedAt.getTime()) < 120000, `startedAt ${info.startedAt.toISOString()} is not now`);
        assert(typeof info.envdVersion === "string" && /^\d+\.\d+\.\d+/.test(info.envdVersion), `envdVersion '${info.envdVersion}'`);
        assert(Number.isInteger(info.cpuCount) && info.cpuCount > 0, `cpuCount ${info.cpuCount}`);
        assert(Number.isInteger(info.memoryMB) && info.memoryMB > 0, `memoryMB ${info.memoryMB}`);
});

await check("list_with_a_metadata_filter", async () => {
        sb2 = await create({ metadata: { run: RUN, second: "yes" } });
        const all = (await listAll({ query: { metadata: { run: RUN } } })).map((s) => s.sandboxId).sort();
        eq([sb.sandboxId, sb2.sandboxId].sort(), all, "sandboxes listed with metadata run=" + RUN);
        const one = await listAll({ query: { metadata: { run: RUN, second: "yes" } } });
        eq([sb2.sandboxId], one.map((s) => s.sandboxId), "sandboxes listed with two metadata pairs");
        eq({ run: RUN, second: "yes" }, one[0].metadata, "metadata in the list");
        eq("running", one[0].state, "state in the list");
        const odd = await listAll({ query: { metadata: { "free key/with=odd chars": "a value, with = & spaces" } } });
        assert(odd.some((s) => s.sandboxId === sb.sandboxId), "a filter on a key and value with odd characters does not find the sandbox");
        eq([], await listAll({ query: { metadata: { run: RUN + "-none" } } }), "a filter no sandbox matches");
}, 60000);

await check("list_pages_with_next_token", async () => {
        const p = Sandbox.list({ query: { metadata: { run: RUN } }, limit: 1 });
        const first = await p.nextItems();
        eq(1, first.length, "items on a page of limit 1");
        assert(p.hasNext && p.nextToken, "a first page of 1 of 2 has a next token (X-Next-Token)");
        const seen = [...first];
        for (let i = 0; p.hasNext && i < 5; i++) seen.push(...(await p.nextItems()));
        assert(!p.hasNext, "paging ends");
        eq([sb.sandboxId, sb2.sandboxId].sort(), seen.map((s) => s.sandboxId).sort(), "sandboxes over all pages");
});

await check("connect_to_a_running_sandbox", async () => {
        const c = await Sandbox.connect(sb.sandboxId);
        eq(sb.sandboxId, c.sandboxId, "sandboxId");
        eq("connected\n", (await c.commands.run("echo connected")).stdout, "a command through the connected sandbox");
        eq("running", (await Sandbox.getInfo(sb.sandboxId)).state, "state after connect");
});

await check("set_timeout_moves_end_at", async () => {
        await sb.setTimeout(300000);
        const left = ((await sb.getInfo()).endAt.getTime() - Date.now()) / 1000;
        assert(left > 270 && left < 330, `endAt is ${left} s away after setTimeout(300 s)`);
        await sb.setTimeout(60000);
        const left2 = ((await sb.getInfo()).endAt.getTime() - Date.now()) / 1000;
        assert(left2 > 30 && left2 < 90, `endAt is ${left2} s away after setTimeout(60 s)`);
        await sb.setTimeout(300000);
});

await check("pause_and_resume_keep_files", async () => {
        await sb.files.write("/home/user/kept.txt", "kept across pause\n");
        // nsbox pauses by freezing the sandbox's cgroup, or, where nsboxd has none (a user
        // without a delegated cgroup), by stopping its processes with SIGSTOP
        const paused0 = await sb.pause();
        eq(true, paused0, "pause()");
        eq("paused", (await Sandbox.getInfo(sb.sandboxId)).state, "state after pause");
        eq(false, await sb.pause(), "pause() of a paused sandbox (409)");
        eq(false, await sb.isRunning(), "isRunning() of a paused sandbox");
        const paused = await listAll({ query: { metadata: { run: RUN }, state: ["paused"] } });
        eq([sb.sandboxId], paused.map((s) => s.sandboxId), "list with state paused");
        const running = await listAll({ query: { metadata: { run: RUN }, state: ["running"] } });
        eq([sb2.sandboxId], running.map((s) => s.sandboxId), "list with state running");
        const r = await Sandbox.connect(sb.sandboxId, { timeoutMs: 120000 });
        eq("running", (await Sandbox.getInfo(sb.sandboxId)).state, "state after connect (resume)");
        eq("kept across pause\n", await r.files.read("/home/user/kept.txt"), "a file written before pause");
        eq("after resume\n", (await r.commands.run("echo after resume")).stdout, "a command after resume");
}, 90000);

// E2B's filesystem-only pause: pause({keepMemory: false}), connect({onResume: "reboot"}) and
// lifecycle.onTimeout {action: "pause", keepMemory: false}: the files stay, the processes go
await check("pause_without_memory_keeps_files_only", async () => {
        const running = async (x, what) =>
                (await x.commands.list()).filter((p) => JSON.stringify([p.cmd, p.args]).includes(what));
        const x = await create({ metadata: { run: `${RUN}-fs` }, timeoutMs: 120000, allowInternetAccess: false });
        await x.files.write("/home/user/fs.txt", "files only\n");
        await x.commands.run("sleep 601", { background: true });
        eq(1, (await running(x, "sleep 601")).length, "the background command before the pause");
        const boot = async (s) => (await s.commands.run("cat /proc/sys/kernel/random/boot_id")).stdout.trim();
        const bootBefore = await boot(x);
        eq(true, await x.pause({ keepMemory: false }), "pause({keepMemory: false})");
        eq("paused", (await Sandbox.getInfo(x.sandboxId)).state, "state after the pause");
        eq(false, await x.isRunning(), "isRunning() while paused");
        const r = await Sandbox.connect(x.sandboxId, { timeoutMs: 120000 });
        eq(true, await r.isRunning(), "isRunning() after connect");
        eq("files only\n", await r.files.read("/home/user/fs.txt"), "a file written before the pause");
        eq([], await running(r, "sleep 601"), "the background command after the reboot");
        const bootAfter = await boot(r);
        assert(/^[0-9a-f-]{36}$/.test(bootAfter) && bootAfter !== bootBefore, `boot_id ${bootBefore}, then ${bootAfter}: a reboot gives a new one`);
        await r.commands.run("sleep 602", { background: true });
        eq(true, await r.pause(), "pause() keeping memory");
        const r2 = await Sandbox.connect(x.sandboxId, { timeoutMs: 120000, onResume: "reboot" });
        eq([], await running(r2, "sleep 602"), "a command after connect({onResume: \"reboot\"})");
        eq("after\n", (await r2.commands.run("echo after")).stdout, "a command after the reboot");
        const y = await create({
                metadata: { run: `${RUN}-fs` },
                timeoutMs: 2000,
                allowInternetAccess: false,
                lifecycle: { onTimeout: { action: "pause", keepMemory: false } },
        });
        await y.files.write("/home/user/y.txt", "timed\n");
        await y.commands.run("sleep 603", { background: true });
        assert(await until(20000, async () => (await Sandbox.getInfo(y.sandboxId)).state === "paused"), "paused once its 2 s were up");
        const y2 = await Sandbox.connect(y.sandboxId, { timeoutMs: 120000 });
        eq("timed\n", await y2.files.read("/home/user/y.txt"), "its file after its timeout's pause");
        eq([], await running(y2, "sleep 603"), "its command after its timeout's pause");
        for (const z of [x, y]) {
                await z.kill();
                made.delete(z.sandboxId);
        }
}, 90000);

await check("auto_pause_then_auto_resume_by_traffic", async () => {
        const a = await create({ metadata: { run: `${RUN}-auto` }, timeoutMs: 2000, lifecycle: { onTimeout: "pause", autoResume: true } });
        const b = await create({ metadata: { run: `${RUN}-auto` }, timeoutMs: 2000, lifecycle: { onTimeout: "pause" } });
        await a.files.write("/home/user/a.txt", "before the pause\n");
        const paused = async (x) => (await Sandbox.getInfo(x.sandboxId)).state === "paused";
        assert(await until(20000, async () => (await paused(a)) && (await paused(b))), "paused once their 2 s were up");
        // without autoResume traffic finds it paused, and it stays so
        let err;
        await b.files.read("/home/user/a.txt").catch((e) => (err = e));
        assert(err, "a read of a paused sandbox without autoResume");
        eq("paused", (await Sandbox.getInfo(b.sandboxId)).state, "that sandbox after the read");
        // with it, the first request resumes it, and it has its timeout again
        eq("before the pause\n", await a.files.read("/home/user/a.txt"), "a read resumes it");
        eq("running", (await Sandbox.getInfo(a.sandboxId)).state, "its state after the read");
        const left = ((await Sandbox.getInfo(a.sandboxId)).endAt.getTime() - Date.now()) / 1000;
        assert(left > -1 && left <= 3, `endAt ${left} s away after the auto-resume (timeout 2 s)`);
        eq("ok\n", (await a.commands.run("echo ok")).stdout, "a command after the auto-resume");
        for (const x of [a, b]) {
                await x.kill();
                made.delete(x.sandboxId);
        }
}, 60000);

await check("kill_then_gone", async () => {
        eq(true, await sb2.kill(), "kill()");
        made.delete(sb2.sandboxId);
        await throwsA(NotFoundError, () => Sandbox.getInfo(sb2.sandboxId), "getInfo of a killed sandbox");
        eq(false, await Sandbox.kill(sb2.sandboxId), "Sandbox.kill of a killed sandbox");
        const left = await listAll({ query: { metadata: { run: RUN } } });
        eq([sb.sandboxId], left.map((s) => s.sandboxId), "sandboxes listed after kill");
});

// a command cut short because its sandbox went: its stream is dropped as E2B's is when the VM
// goes, the SDK finds /health a 502 and raises its TimeoutError saying the sandbox was killed or
// reached its end of life
await check("a_command_cut_by_kill_or_expiry_is_a_timeout_error", async () => {
        const k = await create({ metadata: { run: RUN } });
        const running = k.commands.run("sleep 60");
        running.catch(() => {});
        await sleep(500);
        eq(true, await Sandbox.kill(k.sandboxId), "Sandbox.kill during the command");
        let e = await throwsA(TimeoutError, () => running, "the command's run() after its sandbox was killed");
        assert(/killed or reached its end of life/.test(e.message), `its message: ${e.message}`);
        const x = await create({ metadata: { run: RUN }, timeoutMs: 2000 });
        e = await throwsA(TimeoutError, () => x.commands.run("sleep 60"), "a command past its sandbox's timeout");
        assert(/killed or reached its end of life/.test(e.message), `its message: ${e.message}`);
}, 30000);

await check("kill_of_an_unknown_id_is_false", async () => {
        eq(false, await Sandbox.kill(UNKNOWN), "Sandbox.kill(unknown)");
});

await check("connect_to_an_unknown_id_is_not_found", async () => {
        await throwsA(NotFoundError, () => Sandbox.connect(UNKNOWN), "Sandbox.connect(unknown)");
        await throwsA(NotFoundError, () => Sandbox.getInfo(UNKNOWN), "Sandbox.getInfo(unknown)");
        await throwsA(NotFoundError, () => Sandbox.setTimeout(UNKNOWN, 60000), "Sandbox.setTimeout(unknown)");
        await throwsA(NotFoundError, () => Sandbox.pause(UNKNOWN), "Sandbox.pause(unknown)");
});

await check("bad_key_is_authentication_error", async () => {
        const apiKey = "e2b_" + "0123456789abcdef".repeat(2) + "00000000";
        await throwsA(AuthenticationError, () => Sandbox.create({ apiKey }), "Sandbox.create with a bad key");
        await throwsA(AuthenticationError, () => Sandbox.list({ apiKey }).nextItems(), "Sandbox.list with a bad key");
        await throwsA(AuthenticationError, () => Sandbox.connect(sb.sandboxId, { apiKey }), "Sandbox.connect with a bad key");
        await throwsA(AuthenticationError, () => Sandbox.kill(sb.sandboxId, { apiKey }), "Sandbox.kill with a bad key");
        eq("running", (await sb.getInfo()).state, "the sandbox after a kill with a bad key");
});

await check("another_users_sandbox_is_not_found_with_ones_own_key", async () => {
        const other = process.env.E2B_OTHER_API_KEY;
        if (!other) {
                // a user's own nsboxd serves no other user: what it checks instead is that a key
                // acts as its user (a second key of the same user reaches the sandbox) and that
                // a key nsboxd never made reaches nothing
                const second = process.env.E2B_SECOND_API_KEY;
                assert(second, "the tier gives E2B_SECOND_API_KEY when it has no other user's key");
                eq(sb.sandboxId, (await Sandbox.getInfo(sb.sandboxId, { apiKey: second })).sandboxId, "getInfo with the user's second key");
                await throwsA(AuthenticationError, () => Sandbox.getInfo(sb.sandboxId, { apiKey: "e2b_" + "0".repeat(40) }), "getInfo with a key nsboxd never made");
                return;
        }
        const theirs = await Sandbox.create({ apiKey: other, metadata: { run: RUN, owner: "other" } });
        try {
                await throwsA(NotFoundError, () => Sandbox.connect(theirs.sandboxId), "Sandbox.connect with one's own key");
                await throwsA(NotFoundError, () => Sandbox.getInfo(theirs.sandboxId), "Sandbox.getInfo with one's own key");
                eq(false, await Sandbox.kill(theirs.sandboxId), "Sandbox.kill with one's own key");
                const mine = await listAll({ query: { metadata: { run: RUN } } });
                assert(!mine.some((s) => s.sandboxId === theirs.sandboxId), "one's own list shows the other user's sandbox");
                // the data plane: one's own sandbox handle retargeted at theirs
                const mine1 = await Sandbox.connect(sb.sandboxId);
                const forged = new Sandbox({ ...mine1.connectionConfig, sandboxId: theirs.sandboxId,
                        envdVersion: mine1.envdApi.version, envdAccessToken: mine1.envdAccessToken });
                let reached = false;
                try {
                        await forged.commands.run("true", { requestTimeoutMs: 10000, timeoutMs: 10000 });
                        reached = true;
                } catch (e) {}
                assert(!reached, "one's own data-plane token ran a command in the other user's sandbox");
                eq("running", (await Sandbox.getInfo(theirs.sandboxId, { apiKey: other })).state, "their sandbox, to them");
        } finally {
                await Sandbox.kill(theirs.sandboxId, { apiKey: other }).catch(() => {});
        }
}, 60000);

await check("snapshots_create_from_list_fork_delete", async () => {
        await sb.files.write("/home/user/snap.txt", "in the snapshot\n");
        const snap = await sb.createSnapshot();
        assert(/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(snap.snapshotId), `snapshotId '${snap.snapshotId}'`);
        eq([snap.snapshotId], snap.names, "names");
        const name = `nsbox-e2b-${RUN}`;
        eq(name, (await sb.createSnapshot({ name })).snapshotId, "a named snapshot's id");
        // a snapshot is a template: a sandbox made from it has the files
        const from = await Sandbox.create(snap.snapshotId, { metadata: { run: `${RUN}-from` } });
        made.add(from.sandboxId);
        eq("in the snapshot\n", await from.files.read("/home/user/snap.txt"), "the file in a sandbox made from the snapshot");
        eq(snap.snapshotId, (await from.getInfo()).templateId, "its templateId");
        const listed = await Sandbox.listSnapshots({ sandboxId: sb.sandboxId }).nextItems();
        const ids = listed.map((x) => x.snapshotId);
        assert(ids.includes(snap.snapshotId) && ids.includes(name), `listSnapshots: ${JSON.stringify(ids)}`);
        // fork: two sandboxes from one capture, each with the files, envs and metadata of the source
        const forks = await Sandbox.fork(sb.sandboxId, { count: 2, timeoutMs: 60000 });
        eq(2, forks.length, "forks");
        for (const f of forks) {
                assert(f instanceof Sandbox, `a fork failed: ${f}`);
                made.add(f.sandboxId);
                eq("in the snapshot\n", await f.files.read("/home/user/snap.txt"), "the file in a fork");
                eq("hello from envs\n", (await f.commands.run("echo $GREETING")).stdout, "the source's envs in a fork");
        }
        eq(META, (await forks[0].getInfo()).metadata, "a fork's metadata");
        assert(forks[0].sandboxId !== forks[1].sandboxId && forks[0].sandboxId !== sb.sandboxId, "forks are new sandboxes");
        await forks[0].files.write("/home/user/snap.txt", "changed in one fork\n");
        eq("in the snapshot\n", await forks[1].files.read("/home/user/snap.txt"), "the other fork after a write in one");
        eq("in the snapshot\n", await sb.files.read("/home/user/snap.txt"), "the source after a write in a fork");
        for (const x of [from, ...forks]) {
                await x.kill();
                made.delete(x.sandboxId);
        }
        // deleteSnapshot: true, then false; every snapshot of this run is gone at the end
        eq(true, await Sandbox.deleteSnapshot(name), "deleteSnapshot");
        eq(false, await Sandbox.deleteSnapshot(name), "deleteSnapshot again");
        for (const x of await Sandbox.listSnapshots({ sandboxId: sb.sandboxId }).nextItems())
                eq(true, await Sandbox.deleteSnapshot(x.snapshotId), `deleteSnapshot ${x.snapshotId}`);
        eq([], await Sandbox.listSnapshots({ sandboxId: sb.sandboxId }).nextItems(), "snapshots of the sandbox at the end");
        let err;
        await Sandbox.create("no-such-snapshot-or-template").catch((e) => (err = e));
        assert(err && /404/.test(err.message) && /not found/.test(err.message), `create from an unknown name: ${err}`);
}, 120000);

await check("kill", async () => {
        eq(true, await sb.kill(), "kill()");
        made.delete(sb.sandboxId);
        await throwsA(NotFoundError, () => Sandbox.connect(sb.sandboxId), "Sandbox.connect of a killed sandbox");
        eq([], await listAll({ query: { metadata: { run: RUN } } }), "sandboxes listed at the end");
});

await done();
