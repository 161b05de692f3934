// @e2b/code-interpreter (pinned in package.json) against nsboxd's built-in code-interpreter
// template: Sandbox.create() (its default template, code-interpreter-v1), runCode through the port
// proxy (E2b-Sandbox-Port: 49999), contexts.  tests/integration/code_interpreter.sh runs it.
// Env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.  Novita's code interpreter: tests/e2b/domain.mjs.
import { Sandbox } from "@e2b/code-interpreter";
import { check, assert, eq, atEnd, done, RUN } from "./lib.mjs";

let sb;
atEnd(async () => {
        if (sb) await Sandbox.kill(sb.sandboxId).catch(() => {});
});
const ms = (t0) => `${(performance.now() - t0).toFixed(1)} ms`;

await check("ci_create_default_template", async () => {
        const t0 = performance.now();
        sb = await Sandbox.create({ metadata: { run: RUN }, timeoutMs: 180000 });
        const t1 = performance.now();
        const e = await sb.runCode("1+1");
        eq("2", e.text, "1+1");
        console.error(`create ${(t1 - t0).toFixed(0)} ms, then first runCode('1+1') ${ms(t1)}`);
        const info = await Sandbox.getInfo(sb.sandboxId);
        eq("code-interpreter-v1", info.templateId, "templateId");
}, 90000);

await check("ci_state_persists", async () => {
        await sb.runCode("x = 41");
        eq("42", (await sb.runCode("x + 1")).text, "x + 1");
        await sb.runCode("import os; os.chdir('/tmp')");
        eq("/tmp", (await sb.runCode("os.getcwd()")).text, "cwd");
        const times = [];
        for (let i = 0; i < 20; i++) {
                const t0 = performance.now();
                await sb.runCode("1+1");
                times.push(performance.now() - t0);
        }
        times.sort((a, b) => a - b);
        console.error(`runCode('1+1') round trip: median ${times[10].toFixed(1)} ms, max ${times[19].toFixed(1)} ms`);
});

await check("ci_png_and_html", async () => {
        const p = await sb.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()");
        assert(!p.error, `plot error: ${p.error?.name}`);
        const png = Buffer.from(p.results[0].png, "base64");
        eq("89504e470d0a1a0a", png.subarray(0, 8).toString("hex"), "PNG magic");
        eq(["png"], p.results[0].formats(), "formats");
        const t = await sb.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
        assert(t.results[0].html.includes("<table"), "DataFrame html");
        assert(t.results[0].isMainResult, "main result");
});

// E2B's own result formats: a figure's data as result.chart, a DataFrame's columns as result.data
await check("ci_chart_and_data", async () => {
        const l = await sb.runCode(
                "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label='sq')\nplt.title('Squares')\nplt.xlabel('distance (m)')\nplt.show()",
        );
        const c = l.results[0]?.chart;
        assert(c, `no chart: ${JSON.stringify(l.results.map((r) => Object.keys(r.raw)))}`);
        eq(["line", "Squares", "distance (m)", "m", "linear"], [c.type, c.title, c.x_label, c.x_unit, c.x_scale], "the line chart");
        eq([{ label: "sq", points: [[1, 1], [2, 4], [3, 9]] }], c.elements, "its points");
        assert(c.x_ticks.length > 0 && c.x_ticks.length === c.x_tick_labels.length, `x ticks ${JSON.stringify([c.x_ticks, c.x_tick_labels])}`);
        const b = await sb.runCode("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5], label='n')\nplt.show()");
        eq({ type: "bar", elements: [{ label: "a", group: "n", value: 3 }, { label: "b", group: "n", value: 5 }] },
                { type: b.results[0]?.chart?.type, elements: b.results[0]?.chart?.elements }, "the bar chart");
        const p = await sb.runCode("import matplotlib.pyplot as plt\nplt.pie([1, 3], labels=['x', 'y'])\nplt.show()");
        eq([["x", 90], ["y", 270]], p.results[0]?.chart?.elements.map((e) => [e.label, e.angle]), "the pie chart's wedges");
        const s = await sb.runCode("import matplotlib.pyplot as plt\nfig, (a, b) = plt.subplots(1, 2)\nfig.suptitle('Two')\na.plot([1, 2])\nb.scatter([1], [2])\nplt.show()");
        eq(["superchart", "Two", ["line", "scatter"]], [s.results[0]?.chart?.type, s.results[0]?.chart?.title, s.results[0]?.chart?.elements.map((e) => e.type)], "two axes");
        // E2B's own box-and-whisker case: quartiles, whiskers and outliers read off the boxes
        const bx = await sb.runCode("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.set_title('Scores')\nax.set_xlabel('Class')\n" +
                "ax.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=['A', 'B'], patch_artist=True)\nplt.show()");
        const bc = bx.results[0]?.chart;
        eq(["box_and_whisker", "Scores", "Class", null], [bc?.type, bc?.title, bc?.x_label, bc?.y_label], "the box plot's chart");
        eq([["A", 78, 85, 88, 90, 92, []], ["B", 84, 84.75, 88, 90.5, 95, [76]]],
                bc?.elements.map((e) => [e.label, e.min, e.first_quartile, e.median, e.third_quartile, e.max, e.outliers]), "its boxes");
        // PIL as in E2B's kernels: a save to a file name and show() give the image as a result
        const pil = "from PIL import Image\nimage = Image.new('RGB', (4, 4), 'red')\n";
        for (const how of ["image.save('/tmp/red.png')", "image.show()"]) {
                const im = await sb.runCode(pil + how);
                assert(im.results[0]?.png?.length > 0, `${how}: results ${JSON.stringify(im.results.map((r) => r.formats()))}, error ${im.error?.value}`);
        }
        eq("PNG\n", (await sb.commands.run("head -c 4 /tmp/red.png | tail -c 3; echo")).stdout, "the saved file");
        const d = await sb.runCode("import pandas as pd, numpy as np\npd.DataFrame({'a': [1, np.nan], 'b': ['x', 'y']})");
        eq({ a: [1, null], b: ["x", "y"] }, d.results[0]?.data, "a DataFrame's data");
        eq(["html", "data"], d.results[0]?.formats(), "its formats");
}, 60000);

await check("ci_streams_and_errors", async () => {
        const seen = [];
        const t0 = Date.now();
        const e = await sb.runCode("import time\nprint('a', flush=True)\ntime.sleep(1.5)\nprint('b')", {
                onStdout: (m) => seen.push([m.line, Date.now() - t0]),
        });
        eq(["a\n", "b\n"], e.logs.stdout, "logs.stdout");
        assert(seen[1][1] - seen[0][1] > 1000, `'a' streamed before the end: ${JSON.stringify(seen)}`);
        const z = await sb.runCode("1/0");
        eq(["ZeroDivisionError", "division by zero"], [z.error?.name, z.error?.value], "error");
        assert(z.error.traceback.includes("ZeroDivisionError"), "traceback");
        assert(e.executionCount > 0, "executionCount");
});

// as E2B's server: python and javascript default contexts listed from the start (node starts at
// the javascript one's first cell); a context's cwd is made when missing
await check("ci_default_contexts_and_a_new_cwd", async () => {
        const langs = (await sb.listCodeContexts()).map((x) => x.language).sort();
        eq(["javascript", "python"], langs, "the default contexts");
        eq("3", (await sb.runCode("1 + 2", { language: "javascript" })).text, "the javascript default context's first cell");
        const c = await sb.createCodeContext({ language: "python", cwd: "/workspace/new/dir" });
        eq("/workspace/new/dir", (await sb.runCode("import os; os.getcwd()", { context: c })).text, "cwd made");
        await sb.removeCodeContext(c);
});

// TypeScript ("ts", "typescript"), as E2B's: its types stripped by the host's TypeScript compiler
// (not checked), the cell run as JavaScript in a typescript context of its own
await check("ci_typescript", async () => {
        const e = await sb.runCode('const message: string = "Hello World!"; console.log(message)', { language: "ts" });
        eq(["Hello World!\n"], e.logs.stdout, "E2B's own case");
        eq("/home/user", (await sb.runCode("process.cwd()", { language: "ts" })).text, "its working directory");
        await sb.runCode("interface P { a: number }\nconst p: P = { a: 41 }", { language: "typescript" });
        eq("42", (await sb.runCode("p.a + 1 as number", { language: "ts" })).text, "a declaration kept between cells");
        await sb.runCode("import { readFileSync } from 'fs'", { language: "ts" });
        eq("function", (await sb.runCode("typeof readFileSync", { language: "ts" })).text, "an import kept for the next cells");
        const bad = await sb.runCode("let x: = 3", { language: "ts" });
        eq("SyntaxError", bad.error?.name, "a cell that is not TypeScript");
        assert(/Type expected.*cell\.ts:1:8/.test(bad.error?.value), `its message: ${bad.error?.value}`);
        eq("ReferenceError", (await sb.runCode("p", { language: "javascript" })).error?.name, "p in the javascript context");
        const c = await sb.createCodeContext({ language: "typescript" });
        eq("typescript", c.language, "a new context's language");
        eq("ReferenceError", (await sb.runCode("p", { context: c })).error?.name, "p in a new context");
        await sb.removeCodeContext(c);
});

// R, as E2B's (its cwd and env vars tests): a Jupyter IRkernel context, started at its first cell
await check("ci_r", async () => {
        eq('[1] "/home/user"', (await sb.runCode("getwd()", { language: "r" })).results[0]?.text.trim(), "its working directory");
        const e = await sb.runCode('x <- 41\nprint("hi")\nx + 1', { language: "r" });
        eq(['[1] "hi"\n'], e.logs.stdout, "its output");
        // IRkernel shows a value as display data, not as the main result (E2B's tests read results[0])
        eq("[1] 42", e.results[0]?.text.trim(), "its value");
        eq('[1] "bar"', (await sb.runCode('Sys.getenv("FOO")', { language: "r", envs: { FOO: "bar" } })).results[0]?.text.trim(), "an execution's env var");
        eq('[1] "default"', (await sb.runCode('Sys.getenv("FOO", unset = "default")', { language: "r" })).results[0]?.text.trim(), "gone after it");
        const bad = await sb.runCode("stop('nope')", { language: "r" });
        assert(bad.error && /nope/.test(bad.error.value), `an R error: ${JSON.stringify(bad.error)}`);
        eq("[1] 42", (await sb.runCode("x + 1", { language: "r" })).results[0]?.text.trim(), "x after the error");
});

// Java, as E2B's (its cwd and env vars tests): JShell; the create's envVars and an execution's
// envs are system properties
await check("ci_java", async () => {
        const j = await Sandbox.create({ metadata: { run: RUN }, envs: { TEST_ENV_VAR: "supertest" }, timeoutMs: 120000 });
        try {
                eq("/home/user", (await j.runCode('System.getProperty("user.dir")', { language: "java" })).text, "its working directory");
                eq("supertest", (await j.runCode('System.getProperty("TEST_ENV_VAR")', { language: "java" })).text, "the create's envVars");
                eq("overwrite", (await j.runCode('System.getProperty("TEST_ENV_VAR")', { language: "java", envs: { TEST_ENV_VAR: "overwrite" } })).text, "an execution's envs");
                eq("supertest", (await j.runCode('System.getProperty("TEST_ENV_VAR")', { language: "java" })).text, "the create's again after it");
                const e = await j.runCode('int x = 41;\nSystem.out.println("hi");\nx + 1', { language: "java" });
                eq(["hi\n"], e.logs.stdout, "its output");
                eq("42", e.text, "its value");
        } finally {
                await j.kill();
        }
}, 90000);

await check("ci_contexts", async () => {
        // the SDK's context calls carry no access token: ports are public, as on E2B
        const c = await sb.createCodeContext({ language: "python", cwd: "/tmp" });
        eq(["python", "/tmp"], [c.language, c.cwd], "context");
        await sb.runCode("y = 'mine'", { context: c });
        eq("mine", (await sb.runCode("y", { context: c })).text, "y in its context");
        eq("NameError", (await sb.runCode("y")).error?.name, "y elsewhere");
        assert((await sb.listCodeContexts()).some((x) => x.id === c.id), "listed");
        await sb.restartCodeContext(c);
        eq("NameError", (await sb.runCode("y", { context: c })).error?.name, "y after a restart");
        await sb.removeCodeContext(c);
        assert(!(await sb.listCodeContexts()).some((x) => x.id === c.id), "removed");
});

await check("ci_timeout_interrupts", async () => {
        await sb.runCode("z = 5");
        let err;
        try {
                await sb.runCode("while True: pass", { timeoutMs: 1000 });
        } catch (e) {
                err = e;
        }
        assert(err && err.name === "TimeoutError", `expected TimeoutError, got ${err}`);
        eq("5", (await sb.runCode("z", { timeoutMs: 10000 })).text, "z after the interrupt");
});

await check("ci_bad_input", async () => {
        let err;
        try {
                await sb.runCode("1", { language: "cobol" });
        } catch (e) {
                err = e;
        }
        assert(err && /400/.test(err.message), `unknown language: ${err}`);
        err = undefined;
        try {
                await sb.runCode("1", { context: { id: "nope" } });
        } catch (e) {
                err = e;
        }
        assert(err && err.name === "NotFoundError", `unknown context: ${err}`);
});

// a cell cut short by its sandbox's kill: the proxied answer is cut, not ended, so the SDK finds
// the sandbox gone and raises its TimeoutError (E2B's own test, killedSandbox.test.ts)
await check("ci_run_code_of_a_killed_sandbox_is_a_timeout_error", async () => {
        const k = await Sandbox.create({ metadata: { run: RUN }, timeoutMs: 120000 });
        const running = k.runCode("import time; time.sleep(300)", { timeoutMs: 300000 });
        running.catch(() => {});
        await new Promise((r) => setTimeout(r, 1500));
        await k.kill();
        let err;
        try {
                await running;
        } catch (e) {
                err = e;
        }
        assert(err && err.name === "TimeoutError" && /killed/.test(err.message), `expected TimeoutError, got ${err}`);
}, 90000);

// Novita's code interpreter builds https://49999-ID.DOMAIN whatever NOVITA_SANDBOX_URL says: it is
// run by domain, through TLS, in tests/e2b/domain.mjs (tests/integration/http_tls.sh).

await done();
