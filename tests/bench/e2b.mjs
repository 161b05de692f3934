// make bench: the E2B SDK (e2b, pinned in tests/e2b) against nsboxd's HTTP API, and the same
// operations through nsboxd's own socket in the same run; @e2b/code-interpreter's create and
// runCode (NSBOX_BENCH_CODE=0: not).  Prints a table and one JSON line.
//   node e2b.mjs N SOCKET   (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set; template "base" pooled)
import { Sandbox } from "e2b";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import net from "node:net";
import { randomBytes } from "node:crypto";

const N = Number(process.argv[2] || 50);
const SOCKET = process.argv[3];
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const now = () => process.hrtime.bigint();
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const p99 = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]; };

// nsboxd's socket: one JSON-RPC connection, requests answered in order
function rpcClient(path) {
        const sock = net.createConnection(path);
        let buf = "", id = 0;
        const waiting = new Map();
        sock.on("data", (d) => {
                buf += d;
                let i;
                while ((i = buf.indexOf("\n")) >= 0) {
                        const m = JSON.parse(buf.slice(0, i));
                        buf = buf.slice(i + 1);
                        if (m.id !== undefined && waiting.has(m.id)) { waiting.get(m.id)(m); waiting.delete(m.id); }
                }
        });
        return {
                call(method, params) {
                        return new Promise((res) => { const i = ++id; waiting.set(i, res); sock.write(JSON.stringify({ jsonrpc: "2.0", id: i, method, params }) + "\n"); });
                },
                close() { sock.end(); },
        };
}

const fig = {};
// 1. Sandbox.create() from the pool to the first commands.run('true') result
const first = [], creates = [];
for (let i = 0; i < N; i++) {
        const t0 = now();
        const sbx = await Sandbox.create();
        creates.push(ms(t0));
        await sbx.commands.run("true");
        first.push(ms(t0));
        await sbx.kill();
}
fig.create_ms = median(creates);
fig.create_to_first_run_ms = median(first);
fig.create_to_first_run_p99_ms = p99(first);
// the same, paced: each create once the pool has refilled from the one before (back to back,
// above, a replacement and the last sandbox's teardown share the two cores with the next create)
const paced = [];
for (let i = 0; i < N; i++) {
        await new Promise((res) => setTimeout(res, 150));
        const t0 = now();
        const sbx = await Sandbox.create();
        await sbx.commands.run("true");
        paced.push(ms(t0));
        await sbx.kill();
}
fig.create_to_first_run_paced_ms = median(paced);
fig.create_to_first_run_paced_p99_ms = p99(paced);

// 2. commands.run('true') round trip in a live sandbox, and the socket's exec for comparison
const sbx = await Sandbox.create();
for (let i = 0; i < 5; i++) await sbx.commands.run("true");
const runs = [];
for (let i = 0; i < N * 4; i++) { const t0 = now(); await sbx.commands.run("true"); runs.push(ms(t0)); }
fig.commands_run_ms = median(runs);
if (SOCKET) {
        const c = rpcClient(SOCKET);
        const execs = [];
        for (let i = 0; i < N * 4; i++) {
                const t0 = now();
                const r = await c.call("call", { sandbox: sbx.sandboxId, tool: "exec", params: { cmd: ["true"] } });
                if (r.error) throw new Error(JSON.stringify(r.error));
                execs.push(ms(t0));
        }
        fig.socket_exec_ms = median(execs);
        // what commands.run runs: /bin/bash -l -c CMD (a login shell reads the profile)
        const bashes = [];
        for (let i = 0; i < N * 2; i++) {
                const t0 = now();
                const r = await c.call("call", { sandbox: sbx.sandboxId, tool: "exec", params: { cmd: ["/bin/bash", "-l", "-c", "true"] } });
                if (r.error) throw new Error(JSON.stringify(r.error));
                bashes.push(ms(t0));
        }
        fig.socket_exec_bash_login_ms = median(bashes);
        c.close();
}

// 3. files.write / files.read of 64 MiB
const big = randomBytes(64 << 20);
const w = [], r = [];
for (let i = 0; i < 3; i++) {
        let t0 = now();
        await sbx.files.write("/home/user/big.bin", big.buffer.slice(big.byteOffset, big.byteOffset + big.length));
        w.push(64 / 1.048576 / (ms(t0) / 1000));
        t0 = now();
        const back = await sbx.files.read("/home/user/big.bin", { format: "bytes" });
        r.push(64 / 1.048576 / (ms(t0) / 1000));
        if (back.length !== big.length) throw new Error(`read back ${back.length} bytes`);
}
fig.files_write_MBps = median(w);
fig.files_read_MBps = median(r);
await sbx.kill();

// 4. the code interpreter: cold (e2b.sh's unpooled template code-interpreter-v1, its server and
// first kernel start at create) and from a warm pool (e2b.sh's template code-interpreter: kernels started beforehand;
// paced so that the pool has refilled)
if (process.env.NSBOX_BENCH_CODE !== "0") {
        const warm = [];
        for (let i = 0; i < 6; i++) {
                await new Promise((res) => setTimeout(res, 2500));
                const t0 = now();
                const ci = await CodeSandbox.create("code-interpreter");
                const e = await ci.runCode("1+1");
                if (e.text !== "2") throw new Error(`runCode('1+1') gave ${JSON.stringify(e.text)}`);
                warm.push(ms(t0));
                await ci.kill();
        }
        fig.code_warm_create_to_first_result_ms = median(warm);
        fig.code_warm_create_to_first_result_p99_ms = p99(warm);
        const firsts = [], cells = [];
        for (let i = 0; i < 3; i++) {
                const t0 = now();
                const ci = await CodeSandbox.create("code-interpreter-v1");
                const e = await ci.runCode("1+1");
                if (e.text !== "2") throw new Error(`runCode('1+1') gave ${JSON.stringify(e.text)}`);
                firsts.push(ms(t0));
                if (i === 2)
                        for (let j = 0; j < N; j++) {
                                const t1 = now();
                                await ci.runCode("1+1");
                                cells.push(ms(t1));
                        }
                await ci.kill();
        }
        fig.code_create_to_first_result_ms = median(firsts);
        fig.code_run_ms = median(cells);
        fig.code_run_p99_ms = p99(cells);
}

const row = (k, v, u) => console.log(`  ${k.padEnd(44)} ${v.toFixed(2).padStart(9)} ${u}`);
console.log(`== E2B SDK (e2b 2.51.0) against nsboxd --http, ${N} runs, medians`);
row("Sandbox.create() (pool)", fig.create_ms, "ms");
row("create -> first commands.run('true')", fig.create_to_first_run_ms, `ms (p99 ${fig.create_to_first_run_p99_ms.toFixed(2)})`);
row("  the same, paced 150 ms (pool refilled)", fig.create_to_first_run_paced_ms, `ms (p99 ${fig.create_to_first_run_paced_p99_ms.toFixed(2)})`);
row("commands.run('true') round trip", fig.commands_run_ms, "ms");
if (fig.socket_exec_ms !== undefined) {
        row("socket call exec ['true'] round trip", fig.socket_exec_ms, "ms");
        row("socket exec ['/bin/bash','-l','-c','true']", fig.socket_exec_bash_login_ms, "ms");
        row("  ratio commands.run / the same on the socket", fig.commands_run_ms / fig.socket_exec_bash_login_ms, "x");
}
row("files.write 64 MiB", fig.files_write_MBps, "MB/s");
row("files.read 64 MiB", fig.files_read_MBps, "MB/s");
if (fig.code_run_ms !== undefined) {
        row("CodeInterpreter create -> first runCode('1+1')", fig.code_create_to_first_result_ms, "ms (cold kernel)");
        row("  the same from a warm pool", fig.code_warm_create_to_first_result_ms, `ms (p99 ${fig.code_warm_create_to_first_result_p99_ms.toFixed(2)}; kernel started beforehand)`);
        row("runCode('1+1') round trip", fig.code_run_ms, `ms (p99 ${fig.code_run_p99_ms.toFixed(2)})`);
}
console.log(JSON.stringify({ e2b: fig }));
