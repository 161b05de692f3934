// make bench: what node's own fetch costs on this machine, against a trivial node HTTP server in
// a child process, for the shapes the E2B SDK uses: a small POST answered by a short streamed
// (chunked) reply, like a Connect server-stream (commands.run), and 64 MiB each way (files.read
// as an ArrayBuffer, files.write as multipart and as a plain body).  The floor under e2b.mjs's
// figures that no server can go below.   node node_floor.mjs N
import { fork } from "node:child_process";
import http from "node:http";

const N = Number(process.argv[2] || 50);
if (process.argv[2] === "serve") {
        const big = Buffer.alloc(64 << 20, 7);
        const srv = http.createServer((req, res) => {
                if (req.method === "POST" && req.url === "/stream") {
                        req.resume();
                        req.on("end", () => {
                                res.writeHead(200, { "content-type": "application/connect+json" });
                                res.write('{"event":{"start":{"pid":1}}}');
                                res.end('{"event":{"end":{"exitCode":0}}}');
                        });
                } else if (req.method === "POST") {
                        let n = 0;
                        req.on("data", (c) => (n += c.length));
                        req.on("end", () => res.end(String(n)));
                } else {
                        res.writeHead(200, { "content-type": "application/octet-stream" });
                        res.end(big);
                }
        }).listen(0, "127.0.0.1", () => process.send(srv.address().port));
} else {
        const child = fork(new URL(import.meta.url).pathname, ["serve"]);
        const port = await new Promise((res) => child.once("message", res));
        const u = `http://127.0.0.1:${port}`;
        const now = () => process.hrtime.bigint();
        const ms = (t0) => Number(now() - t0) / 1e6;
        const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
        const fig = {};
        const calls = [];
        for (let i = 0; i < N * 4 + 20; i++) {
                const t0 = now();
                const r = await fetch(`${u}/stream`, { method: "POST", body: '{"process":{"cmd":"/bin/bash"}}', headers: { "content-type": "application/connect+json" } });
                for await (const _ of r.body);
                if (i >= 20) calls.push(ms(t0));
        }
        fig.stream_call_ms = median(calls);
        const big = Buffer.alloc(64 << 20, 9);
        const get = [], post = [], multi = [];
        for (let i = 0; i < 5; i++) {
                let t0 = now();
                const b = await (await fetch(`${u}/big`)).arrayBuffer();
                get.push(64 / 1.048576 / (ms(t0) / 1000));
                if (b.byteLength !== 64 << 20) throw new Error(`GET gave ${b.byteLength} bytes`);
                t0 = now();
                await (await fetch(`${u}/up`, { method: "POST", body: big })).text();
                post.push(64 / 1.048576 / (ms(t0) / 1000));
                const fd = new FormData();
                fd.append("file", new Blob([big]), "big.bin");
                t0 = now();
                await (await fetch(`${u}/up`, { method: "POST", body: fd })).text();
                multi.push(64 / 1.048576 / (ms(t0) / 1000));
        }
        fig.get_64m_MBps = median(get);
        fig.post_64m_MBps = median(post);
        fig.post_multipart_64m_MBps = median(multi);
        child.kill();
        const row = (k, v, u) => console.log(`  ${k.padEnd(44)} ${v.toFixed(2).padStart(9)} ${u}`);
        console.log(`== node ${process.version}'s own fetch against a trivial node server (the floor), medians`);
        row("POST + short streamed reply (a Connect call)", fig.stream_call_ms, "ms");
        row("GET 64 MiB as an ArrayBuffer", fig.get_64m_MBps, "MB/s");
        row("POST 64 MiB body", fig.post_64m_MBps, "MB/s");
        row("POST 64 MiB multipart (files.write's form)", fig.post_multipart_64m_MBps, "MB/s");
        console.log(JSON.stringify({ node_floor: fig }));
}
