// sandbox.commands through the e2b SDK (envd's process.Process over Connect+JSON): foreground
// runs, exit errors, streaming callbacks, background + list + kill, connect by pid, stdin, cwd,
// envs, timeouts, and E2B's user and home.  Env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
import { Sandbox, AuthenticationError, CommandExitError, TimeoutError } from "e2b";
import { check, assert, eq, throwsA, atEnd, done, until, sleep, RUN } from "./lib.mjs";

let sb;
atEnd(async () => {
        if (sb) await sb.kill().catch(() => {});
});
// the command lines of every process in the sandbox (ps may be missing from a small rootfs)
const PROCS = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done";

await check("create_a_sandbox", async () => {
        sb = await Sandbox.create({ metadata: { run: RUN }, timeoutMs: 300000 });
}, 60000);

await check("run_foreground_stdout_stderr_exit_code", async () => {
        const r = await sb.commands.run("echo out; echo err >&2");
        eq(["out\n", "err\n", 0], [r.stdout, r.stderr, r.exitCode], "stdout, stderr, exitCode");
        const big = await sb.commands.run("head -c 1000000 /dev/zero | tr '\\0' x");
        eq(1000000, big.stdout.length, "bytes of a 1 MB stdout");
});

await check("non_zero_exit_is_command_exit_error_with_stderr", async () => {
        const e = await throwsA(CommandExitError, () => sb.commands.run("echo partial; echo bad thing >&2; exit 3"), "exit 3");
        eq([3, "bad thing\n", "partial\n"], [e.exitCode, e.stderr, e.stdout], "exitCode, stderr, stdout of the error");
});

await check("stream_callbacks_in_order", async () => {
        const seen = [];
        const cb = (tag) => (data) => {
                for (const l of data.split("\n")) if (l) seen.push(tag + l);
        };
        const r = await sb.commands.run("for i in 1 2 3; do echo o$i; sleep 0.2; echo e$i >&2; sleep 0.2; done",
                { onStdout: cb("out:"), onStderr: cb("err:") });
        eq(["out:o1", "err:e1", "out:o2", "err:e2", "out:o3", "err:e3"], seen, "callbacks in order");
        eq("o1\no2\no3\n", r.stdout, "stdout collected with callbacks");
});

await check("output_of_any_size_arrives_whole", async () => {
        // 30 MB, faster than the SDK takes it, and a callback that stalls the reader at first:
        // the command waits for its reader, as under envd, and nothing is lost
        let stalls = 3, got = 0;
        const r = await sb.commands.run("seq 1 3600000", {
                onStdout: (d) => {
                        got += d.length;
                        if (stalls-- > 0) for (const end = Date.now() + 700; Date.now() < end; );
                },
        });
        const want = (await sb.commands.run("seq 1 3600000 | wc -c")).stdout.trim();
        eq([want, want], [String(r.stdout.length), String(got)], "bytes in stdout and given to onStdout");
        eq("3599998\n3599999\n3600000\n", r.stdout.slice(-24), "the last lines");
});

await check("background_list_and_kill", async () => {
        const h = await sb.commands.run("sleep 612", { background: true });
        assert(Number.isInteger(h.pid) && h.pid > 0, `pid ${h.pid}`);
        const listed = (await sb.commands.list()).find((p) => p.pid === h.pid);
        assert(listed, `pid ${h.pid} is not in commands.list()`);
        eq(["/bin/bash", ["-l", "-c", "sleep 612"]], [listed.cmd, listed.args], "cmd and args in the list");
        eq(true, await sb.commands.kill(h.pid), "commands.kill");
        let ended = false;
        await h.wait().then(() => (ended = "exit 0"), (e) => (ended = e.name));
        assert(ended === "CommandExitError", `wait() after kill: ${ended}`);
        eq(undefined, (await sb.commands.list()).find((p) => p.pid === h.pid), "the killed process in the list");
        eq(false, await sb.commands.kill(h.pid), "commands.kill of a process gone");
});

await check("connect_to_a_running_process_by_pid", async () => {
        const h = await sb.commands.run("sleep 1; for i in $(seq 1 20); do echo tick$i; sleep 0.1; done", { background: true });
        await h.disconnect();
        const got = [];
        const c = await sb.commands.connect(h.pid, { onStdout: (d) => got.push(d) });
        eq(h.pid, c.pid, "pid of the connected handle");
        const r = await c.wait();
        eq(0, r.exitCode, "exitCode");
        assert(got.join("").includes("tick20\n"), `output through connect: ${JSON.stringify(got.join("")).slice(0, 200)}`);
});

await check("send_stdin_and_close_it", async () => {
        const h = await sb.commands.run("read line; echo got:$line", { background: true, stdin: true });
        await sb.commands.sendStdin(h.pid, "hello stdin\n");
        eq("got:hello stdin\n", (await h.wait()).stdout, "a line read from stdin");
        const cat = await sb.commands.run("cat; echo end", { background: true, stdin: true });
        await cat.sendStdin("abc");
        await cat.sendStdin(new Uint8Array([100, 101, 10]));
        await sb.commands.closeStdin(cat.pid);
        eq("abcde\nend\n", (await cat.wait()).stdout, "cat of what was sent, ended by closeStdin");
});

await check("cwd", async () => {
        eq("/tmp\n", (await sb.commands.run("pwd", { cwd: "/tmp" })).stdout, "pwd with cwd /tmp");
});

await check("envs", async () => {
        const r = await sb.commands.run('echo "$FOO|$BAR"', { envs: { FOO: "a", BAR: "b c=d" } });
        eq("a|b c=d\n", r.stdout, "envs of the command");
});

await check("timeout_kills_the_command", async () => {
        const t0 = Date.now();
        await throwsA(TimeoutError, () => sb.commands.run("sleep 31.5; echo late", { timeoutMs: 2000 }), "a 2 s timeout");
        assert(Date.now() - t0 < 15000, `the timeout took ${(Date.now() - t0) / 1000} s`);
        const left = await until(10000, async () => !(await sb.commands.run(PROCS)).stdout.includes("sleep 31.5"));
        assert(left, "sleep 31.5 still runs after its command's timeout");
});

await check("home_and_working_directory_are_home_user", async () => {
        eq("/home/user\n/home/user\n", (await sb.commands.run("echo $HOME; pwd")).stdout, "$HOME and pwd");
        eq("ok\n", (await sb.commands.run("touch here && echo ok")).stdout, "the home is writable");
});

// commands.run is a login shell: the sandbox's Python environment stays first in its PATH, so
// `python` exists and pip is the environment's (the system's is stopped by PEP 668)
await check("python_and_pip_in_a_login_shell_are_the_sandboxs", async () => {
        const r = await sb.commands.run('python -c "import sys; print(sys.prefix)"; command -v pip');
        eq("/opt/venv\n/opt/venv/bin/pip\n", r.stdout, "python's prefix and pip");
});

await check("whoami_is_user", async () => {
        eq("user\n", (await sb.commands.run("whoami")).stdout, "whoami");
});

// A sandbox has one user, its policy's: "base" answers to user (root refused, saying how to get
// it); the "root" template of this test's nsboxd (policy root) runs everything as root.
await check("user_root_is_the_sandboxs_one_user_or_refused", async () => {
        const e = await throwsA(AuthenticationError, () => sb.commands.run("id -u", { user: "root" }), "user root in base");
        assert(/one user is 'user'.*policy/.test(e.message), `the refusal says why: ${e.message}`);
        const f = await throwsA(AuthenticationError, () => sb.files.read("/home/user/here", { user: "root" }), "files as root in base");
        assert(/one user is 'user'/.test(f.message), `the refusal says why: ${f.message}`);
        eq("user\n", (await sb.commands.run("whoami", { user: "user" })).stdout, "user, named");
        const rs = await Sandbox.create("root", { metadata: { run: RUN }, timeoutMs: 120000 });
        try {
                eq("0 root\n", (await rs.commands.run('echo "$(id -u) $(whoami)"', { user: "root" })).stdout, "root, named");
                eq("0\n", (await rs.commands.run("id -u")).stdout, "the sandbox's user when none is named");
                await rs.files.write("/root/by-root.txt", "r", { user: "root" });
                eq("r", await rs.files.read("/root/by-root.txt", { user: "root" }), "a file written and read as root");
                eq("0\n", (await rs.commands.run("stat -c %u /root/by-root.txt")).stdout, "its owner");
                const u = await throwsA(AuthenticationError, () => rs.commands.run("id -u", { user: "user" }), "user in a root sandbox");
                assert(/one user is 'root'/.test(u.message), `the refusal says why: ${u.message}`);
        } finally {
                await rs.kill();
        }
});

await check("processes_outlive_the_handle_that_started_them", async () => {
        const h = await sb.commands.run("sleep 2; echo outlived > /home/user/outlived", { background: true });
        await h.disconnect();
        await sleep(100);
        const ok = await until(10000, async () => (await sb.files.exists("/home/user/outlived")));
        assert(ok, "a background command whose handle was disconnected did not finish");
});

await done();
