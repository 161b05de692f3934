// The E2B JS SDK's commands and pty against nsboxd's HTTP API (run by http_process.sh, with
// E2B_API_KEY, E2B_API_URL and E2B_SANDBOX_URL set; PTY=1 when the agent has ptys). One line
// per check: "NAME JSON".
import { Sandbox, CommandExitError } from "e2b";

const out = (k, v) => console.log(k + " " + (typeof v === "string" ? v : JSON.stringify(v)));
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const sbx = await Sandbox.create("base", { timeoutMs: 300000 });
try {
  const r = await sbx.commands.run("echo hi");
  out("run", { stdout: r.stdout, exitCode: r.exitCode });
  try {
    await sbx.commands.run("echo out; echo bad >&2; exit 3");
    out("exit", "no error");
  } catch (e) {
    out("exit", { cls: e instanceof CommandExitError, exitCode: e.exitCode, stderr: e.stderr, stdout: e.stdout, error: e.error });
  }
  const seen = [];
  await sbx.commands.run("echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c", {
    onStdout: (d) => seen.push("o:" + d),
    onStderr: (d) => seen.push("e:" + d),
  });
  out("order", JSON.stringify(seen.join("")));
  out("cwd", (await sbx.commands.run("pwd", { cwd: "/tmp" })).stdout.trim());
  out("envs", (await sbx.commands.run("echo $FOO $HOME $USER", { envs: { FOO: "bar" } })).stdout.trim());
  out("who", (await sbx.commands.run("id -un; pwd")).stdout.trim().split("\n").join(","));
  const t0 = Date.now();
  try {
    await sbx.commands.run("sleep 31.5", { timeoutMs: 1500 });
    out("timeout", "no error");
  } catch (e) {
    await sleep(500);
    const left = (await sbx.commands.list()).filter((p) => p.args.join(" ").includes("sleep 31.5"));
    out("timeout", { name: e.name, fast: Date.now() - t0 < 10000, gone: left.length === 0 });
  }
  const bg = await sbx.commands.run("sleep 60", { background: true });
  const mine = (await sbx.commands.list()).find((p) => p.pid === bg.pid);
  out("list", mine ? { cmd: mine.cmd, args: mine.args } : "missing");
  const killed = await sbx.commands.kill(bg.pid);
  await sleep(300);
  const gone = !(await sbx.commands.list()).find((p) => p.pid === bg.pid);
  out("kill", `${killed} killed ${gone} again ${await sbx.commands.kill(bg.pid)}`);
  const bg2 = await sbx.commands.run("echo first; sleep 1; echo second", { background: true });
  await bg2.disconnect();
  const h = await sbx.commands.connect(bg2.pid);
  out("connect", JSON.stringify((await h.wait()).stdout));
  const cat = await sbx.commands.run("cat", { background: true, stdin: true });
  await sbx.commands.sendStdin(cat.pid, "piped\n");
  await sbx.commands.closeStdin(cat.pid);
  out("stdin", JSON.stringify((await cat.wait()).stdout));
  out("nostdin", (await sbx.commands.run("cat; echo done")).stdout.trim());
  try {
    let data = "";
    const dec = new TextDecoder();
    const pty = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { data += dec.decode(d, { stream: true }); } });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("stty size\n"));
    for (let i = 0; i < 50 && !data.includes("30 100"); i++) await sleep(100);
    await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode("stty size\n"));
    for (let i = 0; i < 50 && !data.includes("40 120"); i++) await sleep(100);
    out("pty", { first: data.includes("30 100"), resized: data.includes("40 120"), kill: await sbx.pty.kill(pty.pid) });
  } catch (e) {
    out("pty-error", `${e.name}: ${e.message}`);
  }
} finally {
  await sbx.kill();
}
