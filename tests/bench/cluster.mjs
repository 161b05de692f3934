// make bench: many nodes behind HAProxy (tests/bench/cluster.sh): the e2b SDK's create to first
// commands.run result through the router and straight to one node, interleaved; creates per
// second through the router (3 nodes) and to one node; how the router spread them.
//   node cluster.mjs N   (ROUTER_URL, DIRECT_URL, E2B_API_KEY set)
import { Sandbox } from "e2b";

const N = Number(process.argv[2] || 50);
const SECONDS = Number(process.env.CLUSTER_SECONDS || 4);
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const now = () => process.hrtime.bigint();
const sorted = (a) => [...a].sort((x, y) => x - y);
const median = (a) => sorted(a)[Math.floor(a.length / 2)];
const p99 = (a) => sorted(a)[Math.min(a.length - 1, Math.floor(a.length * 0.99))];
const via = (url) => ({ apiUrl: url, sandboxUrl: url });

const first = { router: [], direct: [] };
for (let i = 0; i < N; i++) {
        for (const [k, url] of i % 2 ? [["router", process.env.ROUTER_URL], ["direct", process.env.DIRECT_URL]]
                                      : [["direct", process.env.DIRECT_URL], ["router", process.env.ROUTER_URL]]) {
                const t0 = now();
                const sbx = await Sandbox.create(via(url));
                await sbx.commands.run("true");
                first[k].push(ms(t0));
                await sbx.kill();
        }
}

// creates (and kills) for SECONDS with 8 at once: per second, and per node
async function rate(url) {
        const end = Date.now() + SECONDS * 1000, nodes = {};
        let n = 0;
        const worker = async () => {
                while (Date.now() < end) {
                        const sbx = await Sandbox.create(via(url));
                        const node = sbx.sandboxId.slice(33) || "-";
                        nodes[node] = (nodes[node] || 0) + 1;
                        n++;
                        await sbx.kill();
                }
        };
        const t0 = now();
        await Promise.all(Array.from({ length: 8 }, worker));
        return { perSecond: n / (ms(t0) / 1000), nodes };
}
const one = await rate(process.env.DIRECT_URL), three = await rate(process.env.ROUTER_URL);
const counts = Object.values(three.nodes);
const fig = {
        create_to_first_run_router_ms: median(first.router), create_to_first_run_router_p99_ms: p99(first.router),
        create_to_first_run_direct_ms: median(first.direct), create_to_first_run_direct_p99_ms: p99(first.direct),
        router_cost_us: (median(first.router) - median(first.direct)) * 1000,
        creates_per_s_3_nodes: three.perSecond, creates_per_s_1_node: one.perSecond,
        spread_max_over_min: counts.length === 3 ? Math.max(...counts) / Math.min(...counts) : null, spread: three.nodes,
};
const f = (x) => (x == null ? "-" : x.toFixed(2));
console.log("== Many nodes behind HAProxy (3 nsboxd on this machine, the e2b SDK)");
console.log(`create -> first commands.run, median (p99): router ${f(fig.create_to_first_run_router_ms)} ms (${f(fig.create_to_first_run_router_p99_ms)}),` +
            ` one node direct ${f(fig.create_to_first_run_direct_ms)} ms (${f(fig.create_to_first_run_direct_p99_ms)}); the router's cost ${fig.router_cost_us.toFixed(0)} us`);
console.log(`creates/s, 8 at once for ${SECONDS} s: 3 nodes through the router ${f(fig.creates_per_s_3_nodes)}, one node direct ${f(fig.creates_per_s_1_node)}` +
            ` (ratio ${f(fig.creates_per_s_3_nodes / fig.creates_per_s_1_node)}; the nodes share this machine's cores)`);
console.log(`placement of the router's creates: ${JSON.stringify(three.nodes)}, max/min ${f(fig.spread_max_over_min)}`);
console.log(JSON.stringify({ cluster: fig }));
