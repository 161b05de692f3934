// sandbox.files through the e2b SDK: GET/POST /files (text, bytes, 64 MiB, several files,
// octet-stream and gzip uploads) and envd's filesystem.Filesystem (Stat, ListDir, MakeDir,
// Move, Remove, WatchDir).  Env: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
import { randomBytes } from "node:crypto";
import { Sandbox, NotFoundError, FileNotFoundError, InvalidArgumentError } from "e2b";
import { check, assert, eq, throwsA, atEnd, done, until, RUN } from "./lib.mjs";

let sb;
atEnd(async () => {
        if (sb) await sb.kill().catch(() => {});
});
const H = "/home/user";
const sorted = (o) => o && Object.fromEntries(Object.entries(o).sort());
const sameBytes = (a, b) => a.length === b.length && Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;

await check("create_a_sandbox", async () => {
        sb = await Sandbox.create({ metadata: { run: RUN }, timeoutMs: 300000 });
}, 60000);

// below 0.5.7 the SDK silently sends every upload as multipart, below 0.6.2 it refuses file
// metadata, below 0.6.3 entries in watch events
await check("envd_version_at_least_0_6_4", async () => {
        const v = sb.envdApi.version;
        const [a, b, c] = v.split(".").map(Number);
        assert(a > 0 || b > 6 || (b === 6 && c >= 4), `envdVersion ${v}: metadata (0.6.2) and watch entries (0.6.3) would be refused`);
});

await check("write_and_read_text", async () => {
        const w = await sb.files.write(`${H}/a.txt`, "hello\nwörld\n");
        eq([`${H}/a.txt`, "a.txt", "file"], [w.path, w.name, w.type], "write's answer (path, name, type)");
        eq("hello\nwörld\n", await sb.files.read(`${H}/a.txt`), "read back");
        eq("hello\nwörld\n", (await sb.commands.run(`cat ${H}/a.txt`)).stdout, "the file as a command sees it");
        await sb.files.write(`${H}/empty.txt`, "");
        eq("", await sb.files.read(`${H}/empty.txt`), "an empty file");
});

await check("relative_paths_are_in_home_and_parents_are_made", async () => {
        const w = await sb.files.write("rel/dir/b.txt", "relative");
        eq(`${H}/rel/dir/b.txt`, w.path, "the path of a relative write");
        eq("relative", await sb.files.read(`${H}/rel/dir/b.txt`), "read by its absolute path");
        eq("user user\n", (await sb.commands.run(`stat -c '%U %G' ${H}/rel/dir/b.txt`)).stdout, "owner of a written file");
});

await check("write_and_read_bytes", async () => {
        const all = new Uint8Array(256).map((_, i) => i);
        await sb.files.write(`${H}/bytes.bin`, all.buffer);
        const back = await sb.files.read(`${H}/bytes.bin`, { format: "bytes" });
        assert(back instanceof Uint8Array, "format bytes gives a Uint8Array");
        assert(sameBytes(all, back), `the 256 byte values came back as ${Buffer.from(back).toString("hex").slice(0, 80)}...`);
        const blob = await sb.files.read(`${H}/bytes.bin`, { format: "blob" });
        assert(sameBytes(all, new Uint8Array(await blob.arrayBuffer())), "format blob");
});

await check("64_mib_random_round_trip", async () => {
        const data = randomBytes(64 << 20);
        await sb.files.write(`${H}/big.bin`, data);
        eq(`${64 << 20}\n`, (await sb.commands.run(`stat -c %s ${H}/big.bin`)).stdout, "size in the sandbox");
        const back = await sb.files.read(`${H}/big.bin`, { format: "bytes" });
        eq(data.length, back.length, "bytes read back");
        assert(sameBytes(data, back), "the 64 MiB read back differ from those written");
        await sb.files.remove(`${H}/big.bin`);
}, 180000);

await check("write_octet_stream_and_gzip", async () => {
        const data = randomBytes(3 << 20);
        await sb.files.write(`${H}/oct.bin`, data, { useOctetStream: true });
        assert(sameBytes(data, await sb.files.read(`${H}/oct.bin`, { format: "bytes" })), "an octet-stream upload read back");
        const text = "gzip ".repeat(100000);
        await sb.files.write(`${H}/gz.txt`, text, { gzip: true });
        eq(text, await sb.files.read(`${H}/gz.txt`, { gzip: true }), "a gzip upload read back with gzip");
        eq(text, await sb.files.read(`${H}/gz.txt`), "a gzip upload read back plain");
        const stream = await sb.files.read(`${H}/oct.bin`, { format: "stream" });
        const parts = [];
        for await (const c of stream) parts.push(c);
        assert(sameBytes(data, Buffer.concat(parts)), "a streamed read");
}, 60000);

await check("write_files_several", async () => {
        const bin = new Uint8Array([0, 1, 2, 255]);
        const got = await sb.files.writeFiles([
                { path: `${H}/m/1.txt`, data: "one" },
                { path: `${H}/m/2.txt`, data: "two" },
                { path: `${H}/m/sub/3.bin`, data: bin },
        ]);
        eq([`${H}/m/1.txt`, `${H}/m/2.txt`, `${H}/m/sub/3.bin`], got.map((w) => w.path).sort(), "paths in the answer");
        eq("one", await sb.files.read(`${H}/m/1.txt`), "1.txt");
        eq("two", await sb.files.read(`${H}/m/2.txt`), "2.txt");
        assert(sameBytes(bin, await sb.files.read(`${H}/m/sub/3.bin`, { format: "bytes" })), "sub/3.bin");
});

await check("list", async () => {
        const l = (await sb.files.list(`${H}/m`)).map((e) => [e.name, e.type, e.path]).sort();
        eq([["1.txt", "file", `${H}/m/1.txt`], ["2.txt", "file", `${H}/m/2.txt`], ["sub", "dir", `${H}/m/sub`]], l, "entries");
        const deep = (await sb.files.list(`${H}/m`, { depth: 2 })).map((e) => e.path).sort();
        eq([`${H}/m/1.txt`, `${H}/m/2.txt`, `${H}/m/sub`, `${H}/m/sub/3.bin`], deep, "entries to depth 2");
        await throwsA(FileNotFoundError, () => sb.files.list(`${H}/no-such-dir`), "list of a missing directory");
});

await check("exists", async () => {
        eq(true, await sb.files.exists(`${H}/m/1.txt`), "a file");
        eq(true, await sb.files.exists(`${H}/m`), "a directory");
        eq(false, await sb.files.exists(`${H}/m/none`), "a missing file");
});

await check("get_info_fields", async () => {
        const f = await sb.files.getInfo(`${H}/m/2.txt`);
        eq(["2.txt", "file", `${H}/m/2.txt`, 3], [f.name, f.type, f.path, f.size], "name, type, path, size");
        assert(/^-[rwx-]{9}$/.test(f.permissions), `permissions '${f.permissions}'`);
        eq(f.permissions.slice(1), permString(f.mode), `permissions '${f.permissions}' and mode ${f.mode}`);
        eq(["user", "user"], [f.owner, f.group], "owner and group");
        assert(f.modifiedTime instanceof Date && Math.abs(Date.now() - f.modifiedTime) < 600000, `modifiedTime ${f.modifiedTime}`);
        const d = await sb.files.getInfo(`${H}/m/sub`);
        eq(["sub", "dir"], [d.name, d.type], "a directory's name and type");
        assert(/^d[rwx-]{9}$/.test(d.permissions), `a directory's permissions '${d.permissions}'`);
        await throwsA(FileNotFoundError, () => sb.files.getInfo(`${H}/m/none`), "getInfo of a missing file");
        await throwsA(NotFoundError, () => sb.files.read(`${H}/m/none`), "read of a missing file");
});

function permString(mode) {
        const r = "rwxrwxrwx";
        return [...r].map((c, i) => (mode & (1 << (8 - i)) ? c : "-")).join("");
}

await check("make_dir_true_then_false", async () => {
        eq(true, await sb.files.makeDir(`${H}/made/deep/er`), "makeDir of a new path (parents too)");
        eq(false, await sb.files.makeDir(`${H}/made/deep/er`), "makeDir of an existing directory");
        eq("dir", (await sb.files.getInfo(`${H}/made/deep/er`)).type, "its type");
});

await check("rename", async () => {
        const e = await sb.files.rename(`${H}/m/1.txt`, `${H}/m/renamed.txt`);
        eq(["renamed.txt", `${H}/m/renamed.txt`, "file"], [e.name, e.path, e.type], "rename's entry");
        eq(false, await sb.files.exists(`${H}/m/1.txt`), "the old name");
        eq("one", await sb.files.read(`${H}/m/renamed.txt`), "the content under the new name");
        await throwsA(FileNotFoundError, () => sb.files.rename(`${H}/m/none`, `${H}/m/x`), "rename of a missing file");
});

await check("remove", async () => {
        await sb.files.remove(`${H}/m/2.txt`);
        eq(false, await sb.files.exists(`${H}/m/2.txt`), "a removed file");
        await sb.files.remove(`${H}/m`);
        eq(false, await sb.files.exists(`${H}/m`), "a removed directory with files in it");
        await sb.files.remove(`${H}/m`); // envd's RemoveAll: nothing there is nothing to remove
        await sb.files.remove(`${H}/no/such/dir/file`);
});

// envd's symlinkTarget is where the link leads, resolved; a dangling link's is its own path
await check("get_info_of_symlinks_resolves_them", async () => {
        await sb.files.write(`${H}/sl/real.txt`, "real");
        await sb.commands.run(`cd ${H}/sl && ln -s real.txt rel && ln -s ${H}/sl/rel chain && ln -s nothing dangling && ln -s .. up`);
        eq(`${H}/sl/real.txt`, (await sb.files.getInfo(`${H}/sl/rel`)).symlinkTarget, "a relative link");
        eq(`${H}/sl/real.txt`, (await sb.files.getInfo(`${H}/sl/chain`)).symlinkTarget, "a link to a link");
        eq(`${H}/sl/dangling`, (await sb.files.getInfo(`${H}/sl/dangling`)).symlinkTarget, "a dangling link");
        const listed = Object.fromEntries((await sb.files.list(`${H}/sl`)).map((e) => [e.name, e.symlinkTarget]));
        eq({ real: undefined, rel: `${H}/sl/real.txt`, up: H }, { real: listed["real.txt"], rel: listed.rel, up: listed.up }, "list's");
});

// E2B's files API writes anywhere (envd is root); here the root is the sandbox's own, writable
await check("files_outside_home_and_tmp", async () => {
        const info = await sb.files.write([{ path: "/0/a.txt", data: "zero" }, { path: "/workspace/b.txt", data: "b" }]);
        eq(["/0/a.txt", "/workspace/b.txt"], info.map((i) => i.path), "written");
        eq("zero b", (await sb.commands.run("cat /0/a.txt; echo -n ' '; cat /workspace/b.txt")).stdout, "read back by a command");
        eq(true, await sb.files.makeDir("/data/in"), "makeDir at the root");
});

// with one URL for every sandbox (E2B_SANDBOX_URL) the URLs name no sandbox: the signature does
// as envd's write: an executable stays executable, a symlink is written through, hard links stay
await check("write_keeps_mode_symlinks_and_hard_links", async () => {
        await sb.files.write(`${H}/s.sh`, "#!/bin/sh\necho 1\n");
        await sb.commands.run(`cd ${H} && chmod 750 s.sh && ln -s s.sh link && ln s.sh hard`);
        const before = (await sb.commands.run(`stat -c '%a %i %h' ${H}/s.sh`)).stdout;
        await sb.files.write(`${H}/s.sh`, "#!/bin/sh\necho 2\n");
        eq(before, (await sb.commands.run(`stat -c '%a %i %h' ${H}/s.sh`)).stdout, "mode, inode and links after a write");
        eq("2\n", (await sb.commands.run(`${H}/hard`)).stdout, "the hard link runs the new script");
        await sb.files.write(`${H}/link`, "#!/bin/sh\necho 3\n");
        eq("symbolic link\n3\n", (await sb.commands.run(`stat -c %F ${H}/link && ${H}/s.sh`)).stdout, "a write through the symlink");
        await sb.commands.run(`rm ${H}/hard`);
        await sb.files.write(`${H}/s.sh`, "#!/bin/sh\necho 4\n");
        eq("750\n4\n", (await sb.commands.run(`stat -c %a ${H}/s.sh && ${H}/s.sh`)).stdout, "mode after an atomic replace");
        // through a link to another file system (the sandbox's /dev/shm is a tmpfs of its own)
        await sb.commands.run(`echo old > /dev/shm/f && chmod 640 /dev/shm/f && ln -s /dev/shm/f ${H}/shm`);
        await sb.files.write(`${H}/shm`, "new\n");
        eq("symbolic link\n640\nnew\n", (await sb.commands.run(`stat -c %F ${H}/shm && stat -c %a /dev/shm/f && cat /dev/shm/f`)).stdout,
                "a write through a link to another file system");
        eq("", (await sb.commands.run(`ls -A ${H} /dev/shm | grep -e '\\.upload-' -e '\\.nsbox-' || true`)).stdout, "no temporary left");
});

await check("upload_and_download_urls_work_with_no_header", async () => {
        const form = new FormData();
        form.append("file", new Blob(["by a signed URL\n"]), "signed.txt");
        const up = await fetch(await sb.uploadUrl(`${H}/signed.txt`), { method: "POST", body: form });
        eq(200, up.status, `POST to uploadUrl: ${await up.text()}`);
        eq("by a signed URL\n", await sb.files.read(`${H}/signed.txt`), "the uploaded file");
        const down = await fetch(await sb.downloadUrl(`${H}/signed.txt`, { useSignatureExpiration: 60 }));
        eq([200, "by a signed URL\n"], [down.status, await down.text()], "GET of downloadUrl");
        const url = new URL(await sb.downloadUrl(`${H}/signed.txt`));
        url.searchParams.set("path", `${H}/a.txt`); // another file under the same signature
        const other = await fetch(url);
        eq([401, "invalid signature: no sandbox of this nsboxd signed it"], [other.status, (await other.json()).message], "a signature for another path");
});

await check("watch_dir_create_write_remove_events", async () => {
        await sb.files.makeDir(`${H}/w`);
        const events = [];
        const h = await sb.files.watchDir(`${H}/w`, (e) => events.push(e), { timeoutMs: 20000 });
        try {
                const seen = () => JSON.stringify(events.map((e) => [e.name, e.type]));
                const has = (t) => events.some((e) => e.name === "f.txt" && e.type === t);
                // files.write alone: a create and a write of f.txt, as envd reports a written file,
                // and nothing of the temporary it goes through
                await sb.files.write(`${H}/w/f.txt`, "1");
                assert(await until(10000, () => has("create") && has("write")), `after files.write: ${seen()}`);
                await sb.commands.run(`echo more >> ${H}/w/f.txt`);
                await sb.files.remove(`${H}/w/f.txt`);
                const all = await until(10000, () => has("remove"));
                assert(all, `events seen: ${seen()}`);
                const order = events.filter((e) => e.name === "f.txt").map((e) => e.type);
                assert(order.indexOf("create") < order.lastIndexOf("remove"), `order of events: ${order}`);
                eq([], events.filter((e) => e.name !== "f.txt").map((e) => e.name), "events of other names than f.txt");
        } finally {
                await h.stop();
        }
});

// envd 0.6.2: metadata sent with an upload (X-Metadata-* headers) is kept on the file as
// user.e2b.* attributes, lowercased, shown by getInfo, list and rename; the next upload replaces it
await check("file_metadata_is_kept_shown_and_replaced", async () => {
        const w = await sb.files.write(`${H}/m.txt`, "m", { metadata: { Author: "mish", purpose: "a b" } });
        const want = { author: "mish", purpose: "a b" };
        eq(want, sorted(w.metadata), "write's answer");
        eq(want, sorted((await sb.files.getInfo(`${H}/m.txt`)).metadata), "getInfo");
        eq(want, sorted((await sb.files.list(H)).find((e) => e.name === "m.txt").metadata), "list");
        eq("user.e2b.author mish\nuser.e2b.purpose a b\n",
                (await sb.commands.run(`python3 -c "import os; [print(k, os.getxattr('${H}/m.txt', k).decode()) for k in sorted(os.listxattr('${H}/m.txt'))]"`)).stdout,
                "the attributes a program in the sandbox reads");
        eq(want, sorted((await sb.files.rename(`${H}/m.txt`, `${H}/m2.txt`)).metadata), "rename's answer");
        const many = await sb.files.write([{ path: `${H}/m3.txt`, data: "3" }, { path: `${H}/m4.txt`, data: "4" }],
                { metadata: { k: "v" }, useOctetStream: true });
        eq([{ k: "v" }, { k: "v" }], many.map((f) => f.metadata), "several files, octet-stream");
        await sb.commands.run(`cd ${H} && python3 -c "import os; os.setxattr('m3.txt', 'user.e2b.set', b'inside')"`);
        eq({ k: "v", set: "inside" }, sorted((await sb.files.getInfo(`${H}/m3.txt`)).metadata), "an attribute set in the sandbox");
        eq(undefined, (await sb.files.write(`${H}/m2.txt`, "again")).metadata, "an upload without metadata clears it");
        eq(undefined, (await sb.files.getInfo(`${H}/m2.txt`)).metadata, "getInfo after that");
        eq({ x: "1" }, (await sb.files.write(`${H}/m3.txt`, "again", { metadata: { x: "1" } })).metadata, "replaced, not merged");
        // a key longer than an attribute name takes: a 400, the file untouched
        const e = await throwsA(InvalidArgumentError, () => sb.files.write(`${H}/m3.txt`, "no", { metadata: { ["k".repeat(247)]: "v" } }),
                "a 247-byte key");
        assert(/invalid metadata/.test(e.message), `a 247-byte key: ${e.message}`);
        eq("again", await sb.files.read(`${H}/m3.txt`), "the file after a refused upload");
});

// envd 0.6.3: a watch with includeEntry sends what a create, write or chmod left there
await check("watch_dir_include_entry", async () => {
        await sb.files.makeDir(`${H}/we`);
        const events = [];
        const h = await sb.files.watchDir(`${H}/we`, (e) => events.push(e), { timeoutMs: 20000, includeEntry: true });
        try {
                await sb.files.write(`${H}/we/f.txt`, "12", { metadata: { k: "v" } });
                await sb.commands.run(`chmod 600 ${H}/we/f.txt && rm ${H}/we/f.txt`);
                assert(await until(10000, () => events.some((e) => e.type === "remove")), `events: ${JSON.stringify(events)}`);
                const of = (t) => events.find((e) => e.name === "f.txt" && e.type === t);
                eq(["f.txt", `${H}/we/f.txt`, "file", 2, { k: "v" }], ["name", "path", "type", "size", "metadata"].map((k) => of("create").entry[k]),
                        "the create's entry");
                eq(0o600, of("chmod").entry.mode, "the chmod's entry's mode");
                eq(undefined, of("remove").entry, "a remove has no entry");
        } finally {
                await h.stop();
        }
});

await done();
