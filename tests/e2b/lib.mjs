// The checks' harness for the E2B conformance programs (tests/integration/e2b.sh runs them).
// Each check prints one line: "ok NAME", "not ok NAME: why" or "skip NAME: why"; a check that
// does not finish within its time box fails, and the program goes on with the next.  done()
// exits 1 if any check failed.  Errors nobody caught become a "not ok" line too.

let failed = 0;
const cleanups = [];

const oneLine = (s) => String(s).replace(/\s+/g, " ").slice(0, 600);
// an error in one line, with its cause (fetch failed: ECONNREFUSED ...)
export const why = (e) => {
        if (!e || !e.name) return oneLine(e);
        const c = e.cause ? ` (${e.cause.code ?? ""} ${e.cause.message ?? e.cause})` : "";
        const stderr = typeof e.stderr === "string" && e.stderr ? ` (stderr: ${e.stderr})` : "";
        return oneLine(`${e.name}: ${e.message}${c}${stderr}`);
};

process.on("uncaughtException", (e) => {
        failed++;
        console.log(`not ok uncaught_error: ${why(e)}`);
});
process.on("unhandledRejection", (e) => {
        failed++;
        console.log(`not ok unhandled_rejection: ${why(e)}`);
});

export class Skip extends Error {}

// A promise that rejects after ms, with a message saying what took too long.
export function within(ms, promise, what = "the call") {
        let timer;
        const t = new Promise((_, reject) => {
                timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms);
        });
        return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

class CheckTimeout extends Error {}
let timeoutsInARow = 0;

// Runs fn (async, throws to fail, throws Skip to skip) as the check NAME, time-boxed.  After two
// checks in a row ran out of time the server is taken as hung: the rest fail at once.
export async function check(name, fn, timeoutMs = 30000) {
        if (timeoutsInARow >= 2) {
                failed++;
                console.log(`not ok ${name}: not run, the server stopped answering (two checks in a row timed out)`);
                return false;
        }
        let timer;
        const box = new Promise((_, reject) => {
                timer = setTimeout(() => reject(new CheckTimeout(`did not finish within ${timeoutMs / 1000} s`)), timeoutMs);
        });
        try {
                await Promise.race([Promise.resolve().then(fn), box]);
                timeoutsInARow = 0;
                console.log(`ok ${name}`);
                return true;
        } catch (e) {
                timeoutsInARow = e instanceof CheckTimeout ? timeoutsInARow + 1 : 0;
                if (e instanceof Skip) {
                        console.log(`skip ${name}: ${oneLine(e.message)}`);
                        return true;
                }
                failed++;
                console.log(`not ok ${name}: ${why(e)}`);
                return false;
        } finally {
                clearTimeout(timer);
        }
}

export function assert(cond, msg) {
        if (!cond) throw new Error(msg);
}

export function eq(want, got, what) {
        const w = JSON.stringify(want), g = JSON.stringify(got);
        if (w !== g) throw new Error(`${what}: expected ${w}, got ${g}`);
}

// Expects fn to throw an instance of cls (a name, for the message); returns the error.
export async function throwsA(cls, fn, what) {
        let err;
        try {
                await fn();
        } catch (e) {
                err = e;
        }
        if (!err) throw new Error(`${what}: expected ${cls.name}, nothing was thrown`);
        if (!(err instanceof cls)) throw new Error(`${what}: expected ${cls.name}, got ${why(err)}`);
        return err;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls fn until it returns a truthy value or ms pass; returns the last value.
export async function until(ms, fn, every = 100) {
        const end = Date.now() + ms;
        let v;
        while (!(v = await fn()) && Date.now() < end) await sleep(every);
        return v;
}

// fn runs at the end, before the exit, whatever happened (e.g. kill the sandboxes made).
export function atEnd(fn) {
        cleanups.push(fn);
}

export async function done() {
        for (const fn of cleanups.reverse()) {
                try {
                        await within(30000, Promise.resolve().then(fn), "cleanup");
                } catch (e) {
                        failed++;
                        console.log(`not ok cleanup: ${why(e)}`);
                }
        }
        process.exit(failed ? 1 : 0);
}

// A unique tag for this run, so that parallel or earlier runs never mix.
export const RUN = `${process.pid}-${Date.now().toString(36)}`;
