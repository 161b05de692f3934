// Many nsboxd nodes behind HAProxy (contrib/haproxy), driven by the unmodified e2b SDK pointed at
// the router: creates placed by free capacity, and every call on a sandbox (command, file, a
// streamed command's output, unbuffered, connect) reaching the node its id names.  tests/integration/cluster.sh
// runs it and checks the placement on each node's own socket.  Env: E2B_API_URL and
// E2B_SANDBOX_URL (the router), E2B_API_KEY (the key file every node shares), CLUSTER_CREATES,
// CLUSTER_IDS (a file: the ids made, one a line, for the shell), CLUSTER_NODES (the node names).
import { writeFileSync } from "node:fs";
import { Sandbox } from "e2b";
import { check, assert, eq, done, RUN } from "./lib.mjs";

const N = Number(process.env.CLUSTER_CREATES ?? 60);
const NODES = (process.env.CLUSTER_NODES ?? "").split(/\s+/).filter(Boolean);
const boxes = [];
const nodeOf = (id) => id.slice(33);

// n tasks, at most width at a time
async function pool(n, width, fn) {
        let next = 0;
        const worker = async () => {
                while (next < n) await fn(next++);
        };
        await Promise.all(Array.from({ length: width }, worker));
}

await check("creates_through_the_router", async () => {
        await pool(N, 6, async (i) => {
                boxes[i] = await Sandbox.create({ metadata: { cluster: RUN, n: String(i) }, timeoutMs: 600000 });
        });
        const ids = boxes.map((b) => b.sandboxId);
        writeFileSync(process.env.CLUSTER_IDS ?? "/dev/null", ids.join("\n") + "\n");
        eq(N, new Set(ids).size, "distinct sandboxes");
        for (const id of ids) assert(NODES.includes(nodeOf(id)), `sandbox ${id} names node '${nodeOf(id)}', not one of ${NODES.join(" ")}`);
}, 180000);

await check("every_call_reaches_its_node", async () => {
        assert(boxes.length === N, "no sandboxes");
        await pool(N, 6, async (i) => {
                const sb = boxes[i];
                const r = await sb.commands.run("echo $((6 * 7))");
                eq("42\n", r.stdout, `a command on ${sb.sandboxId}`);
                await sb.files.write("/tmp/whoami", sb.sandboxId);
                eq(sb.sandboxId, await sb.files.read("/tmp/whoami"), `a file written then read on ${sb.sandboxId}`);
                const lines = [];
                await sb.commands.run("for i in 1 2 3; do echo $i; sleep 0.05; done", { onStdout: (d) => lines.push(d) });
                eq("1\n2\n3\n", lines.join(""), `a streamed command's output on ${sb.sandboxId}`);
        });
}, 300000);

// A stream through the router is not buffered: a command's first line arrives while it still runs
// (one sandbox of each node that holds some).
await check("streams_pass_the_router_unbuffered", async () => {
        const one = new Map();
        for (const b of boxes) if (!one.has(nodeOf(b.sandboxId))) one.set(nodeOf(b.sandboxId), b);
        assert(one.size > 0, "no sandboxes");
        for (const [node, sb] of one) {
                const t0 = Date.now();
                let first = null;
                await sb.commands.run("echo 1; sleep 1; echo 2", { onStdout: () => (first ??= Date.now()) });
                const end = Date.now();
                assert(first !== null && end - first >= 600, `node ${node}: the first line came ${first === null ? "never" : first - t0} ms in, the end at ${end - t0} ms`);
        }
}, 60000);

await check("list_with_a_metadata_filter_answers_for_every_node", async () => {
        const seen = new Set(), pages = Sandbox.list({ query: { metadata: { cluster: RUN } }, limit: 25 });
        for (let i = 0; pages.hasNext && i < 20; i++) for (const s of await pages.nextItems()) seen.add(s.sandboxId);
        const want = boxes.map((b) => b.sandboxId);
        const missing = want.filter((id) => !seen.has(id));
        assert(missing.length === 0 && seen.size === want.length, `listed ${seen.size} of ${want.length}; missing ${missing.slice(0, 3).join(" ")}`);
}, 60000);

// A snapshot nsboxd names carries its node: a create from it, through the router, goes there.
await check("creates_from_a_snapshot_go_to_its_node", async () => {
        const sb = boxes[boxes.length - 1], node = nodeOf(sb.sandboxId);
        await sb.files.write("/tmp/from-snapshot", "kept");
        const snap = await sb.createSnapshot();
        assert(snap.snapshotId.endsWith(`-${node}`), `snapshotId '${snap.snapshotId}' does not name node ${node}`);
        for (let i = 0; i < 4; i++) {
                const from = await Sandbox.create(snap.snapshotId, { metadata: { cluster: `${RUN}-snap` } });
                eq(node, nodeOf(from.sandboxId), `create ${i} from the snapshot`);
                eq("kept", await from.files.read("/tmp/from-snapshot"), "the snapshot's file");
                await from.kill();
        }
        await Sandbox.deleteSnapshot(snap.snapshotId);
}, 60000);

await check("connect_and_info_by_id", async () => {
        for (const i of [0, Math.floor(N / 2), N - 1]) {
                const id = boxes[i].sandboxId;
                const sb = await Sandbox.connect(id);
                eq(id, (await sb.commands.run("cat /tmp/whoami")).stdout, `connect(${id}) reaches the sandbox itself`);
                const info = await Sandbox.getInfo(id);
                eq(String(i), info.metadata.n, `getInfo(${id})'s metadata`);
        }
}, 60000);

await done();
