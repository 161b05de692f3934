// sandbox.pty through the e2b SDK: an interactive bash on a terminal (Start with pty), input
// (SendInput pty), resize (Update), kill (SendSignal).  Env: E2B_API_URL, E2B_SANDBOX_URL,
// E2B_API_KEY.
import { Sandbox } from "e2b";
import { check, assert, eq, atEnd, done, until, sleep, RUN } from "./lib.mjs";

let sb, term;
let screen = "";
const dec = new TextDecoder();
const enc = new TextEncoder();
atEnd(async () => {
        if (sb) await sb.kill().catch(() => {});
});
// waits until the terminal's output (since mark) includes text
const seen = async (text, mark, ms = 10000) => until(ms, () => screen.slice(mark).includes(text));

await check("create_a_sandbox", async () => {
        sb = await Sandbox.create({ metadata: { run: RUN }, timeoutMs: 300000 });
}, 60000);

await check("pty_create_with_on_data", async () => {
        term = await sb.pty.create({ cols: 80, rows: 24, onData: (d) => (screen += dec.decode(d, { stream: true })), timeoutMs: 0 });
        assert(Number.isInteger(term.pid) && term.pid > 0, `pid ${term.pid}`);
        const listed = (await sb.commands.list()).find((p) => p.pid === term.pid);
        assert(listed, `the terminal's pid ${term.pid} is not in commands.list()`);
});

await check("send_input_is_echoed_and_run", async () => {
        const mark = screen.length;
        await sb.pty.sendInput(term.pid, enc.encode("echo hi-$((40+2))\n"));
        assert(await seen("hi-42", mark), `no 'hi-42' on the terminal: ${JSON.stringify(screen.slice(mark)).slice(0, 300)}`);
        assert(screen.slice(mark).includes("echo hi-$((40+2))"), "the terminal did not echo the input");
});

await check("terminal_environment", async () => {
        const mark = screen.length;
        await sb.pty.sendInput(term.pid, enc.encode("echo T=$TERM; tty\n"));
        assert(await seen("T=xterm-256color", mark), `TERM: ${JSON.stringify(screen.slice(mark)).slice(0, 300)}`);
        assert(await seen("/dev/pts/", mark), `tty: ${JSON.stringify(screen.slice(mark)).slice(0, 300)}`);
});

await check("resize_then_stty_size", async () => {
        let mark = screen.length;
        await sb.pty.sendInput(term.pid, enc.encode("stty size\n"));
        assert(await seen("24 80", mark), `stty size before resize: ${JSON.stringify(screen.slice(mark)).slice(0, 300)}`);
        await sb.pty.resize(term.pid, { cols: 100, rows: 30 });
        mark = screen.length;
        await sb.pty.sendInput(term.pid, enc.encode("stty size\n"));
        assert(await seen("30 100", mark), `stty size after resize to 100x30: ${JSON.stringify(screen.slice(mark)).slice(0, 300)}`);
});

await check("ctrl_c_interrupts_the_foreground_command", async () => {
        await sb.pty.sendInput(term.pid, enc.encode("sleep 77; echo slept\n"));
        await sleep(1000);
        await sb.pty.sendInput(term.pid, new Uint8Array([3]));
        const mark = screen.length;
        await sb.pty.sendInput(term.pid, enc.encode("echo after-$((1+1))\n"));
        assert(await seen("after-2", mark, 5000), `the shell after ^C: ${JSON.stringify(screen.slice(mark)).slice(0, 300)}`);
});

await check("kill", async () => {
        eq(true, await sb.pty.kill(term.pid), "pty.kill");
        let ended = false;
        await term.wait().then(() => (ended = "exit 0"), (e) => (ended = e.name));
        assert(ended === "CommandExitError", `wait() after kill: ${ended}`);
        eq(undefined, (await sb.commands.list()).find((p) => p.pid === term.pid), "the killed terminal in the list");
        eq(false, await sb.pty.kill(term.pid), "pty.kill of a terminal gone");
});

await done();
