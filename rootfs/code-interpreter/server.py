#!/usr/bin/python3
"""nsbox code interpreter: E2B's code-interpreter HTTP API inside a sandbox.

Runs in the sandbox (nsboxd's built-in `code-interpreter` template starts it) and listens on
127.0.0.1:49999, which nsboxd's port proxy reaches (E2b-Sandbox-Port: 49999).  A context is a
live Jupyter kernel (ipykernel, Debian's python3-ipykernel); the API is what @e2b/code-interpreter
2.8.0 sends and parses:

  POST /execute {code, context_id?, language?, env_vars?, timeout?}
       -> 200, one JSON object a line: stdout, stderr, result, error, number_of_executions,
          end_of_execution
  POST /contexts {language?, cwd?} -> {id, language, cwd};  GET /contexts
  DELETE /contexts/ID;  POST /contexts/ID/restart;  GET /health

Python, R (the host's IRkernel), JavaScript, TypeScript (its types stripped by the host's TypeScript
compiler, then run as JavaScript), Java (the host JDK's JShell) and bash: other languages are
refused with a clear 400
(man/nsbox-protocol.7).  Only the standard library and Debian's jupyter_client are used; a Python
kernel gets KERNEL_SETUP, E2B's extra result formats.
"""

import argparse
import base64
import json
import os
import queue
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = (1 << 20) + 65536      # the code (1 MiB) and the rest of the request
MAX_CODE = 1 << 20
MAX_CONTEXTS = 16
MAX_OUTPUT = 32 << 20             # bytes of lines one execution may send
MAX_ENV_VARS = 256
KERNEL_START_S = 60
INTERRUPT_GRACE_S = 5             # after an interrupt, how long the kernel has to go idle
HEARTBEAT_S = 1                   # a silent cell's line every second
SETUP_MAX_CELLS = 100000          # a DataFrame's values, a chart's points: more, no such format
LANGUAGES = {"python": "python", "python3": "python", "py": "python", "ipython": "python",
             "javascript": "javascript", "js": "javascript", "node": "javascript",
             "typescript": "typescript", "ts": "typescript", "r": "r", "java": "java",
             "bash": "bash", "sh": "bash", "shell": "bash"}


# The TypeScript compiler a typescript context strips its cells' types with: Debian's
# node-typescript, or one installed with npm install -g.
TS_COMPILERS = ("/usr/share/nodejs/typescript/lib/typescript.js",
                "/usr/lib/node_modules/typescript/lib/typescript.js",
                "/usr/local/lib/node_modules/typescript/lib/typescript.js")


class ApiError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _runtime_env():
    """Kernels write connection files and caches: give them a private writable place."""
    base = tempfile.mkdtemp(prefix="nsbox-ci-")
    os.environ.setdefault("JUPYTER_RUNTIME_DIR", os.path.join(base, "runtime"))
    home = os.environ.get("HOME", "")
    if not home or not os.access(home, os.W_OK):
        os.environ["IPYTHONDIR"] = os.path.join(base, "ipython")
        os.environ["MPLCONFIGDIR"] = os.path.join(base, "mpl")
        os.environ["JUPYTER_DATA_DIR"] = os.path.join(base, "data")
    # charts come back as pictures, as in a notebook
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # Debian's matplotlib reads /etc/matplotlibrc only, which the sandbox's host view leaves out
    rc = "/usr/share/matplotlib/mpl-data/matplotlibrc"
    if not os.path.exists("/etc/matplotlibrc") and os.path.exists(rc):
        os.environ.setdefault("MATPLOTLIBRC", rc)
    # nor /etc/fonts: a configuration of our own for fontconfig (matplotlib runs fc-list)
    if not os.path.exists("/etc/fonts/fonts.conf") and "FONTCONFIG_FILE" not in os.environ:
        conf = os.path.join(base, "fonts.conf")
        with open(conf, "w") as f:
            f.write("<?xml version=\"1.0\"?>\n<fontconfig><dir>/usr/share/fonts</dir>"
                    "<cachedir>%s</cachedir></fontconfig>\n" % os.path.join(base, "fontconfig"))
        os.environ["FONTCONFIG_FILE"] = conf
    return base


# The JavaScript context: node with a context of its own that keeps its globals between cells;
# requests on stdin (a JSON line each), the cell's value or error on fd 3, then the marker on
# stdout and on stderr, so that each stream is known to be complete.  A cell runs as a script in
# that context (breakOnSigint: an interrupt ends even a busy loop), unless it has a top-level
# await or a static import: node's REPL evaluates those (it rewrites a top-level await, keeping
# the cell's declarations for the next cells), each import made a dynamic one first.  What a cell
# throws later, in a callback, is an error of the cell running then: the context lives on.
JS_DRIVER = r"""
const vm = require('vm'), util = require('util'), fs = require('fs'), readline = require('readline');
const repl = require('repl'), { PassThrough } = require('stream');
const out = fs.createWriteStream(null, { fd: Number(process.env.NSBOX_CI_FD) });
delete process.env.NSBOX_CI_FD;
// a typescript context: each cell's types stripped (not checked) by the TypeScript compiler, its
// value imports kept even when the cell itself does not use them (a later cell may)
const ts = process.env.NSBOX_CI_TS ? require(process.env.NSBOX_CI_TS) : null;
delete process.env.NSBOX_CI_TS;
function stripTypes(code) {
  if (!ts) return code;
  const r = ts.transpileModule(code, { fileName: 'cell.ts', reportDiagnostics: true, compilerOptions: {
    target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, isolatedModules: true, preserveValueImports: true } });
  const d = (r.diagnostics || []).find((x) => x.category === ts.DiagnosticCategory.Error);
  if (d) {
    let where = '';
    if (d.file && d.start !== undefined) {
      const lc = d.file.getLineAndCharacterOfPosition(d.start);
      where = ' (cell.ts:' + (lc.line + 1) + ':' + (lc.character + 1) + ')';
    }
    const e = new SyntaxError(ts.flattenDiagnosticMessageText(d.messageText, '\n') + where);
    e.stack = 'SyntaxError: ' + e.message;
    throw e;
  }
  return r.outputText;
}
const server = repl.start({ input: new PassThrough(), output: new PassThrough(), terminal: false, useGlobal: false, prompt: '' });
const ctx = server.context;
// the REPL's context logs to the REPL's output: the cells' console is the process's
Object.defineProperty(ctx, 'console', { value: console, writable: true, configurable: true, enumerable: false });
let settle = null;  // the running cell's end: settle(error) or settle(null, value)
// what a cell throws later (a timer's callback, a promise nobody awaited) ends the cell running
// then, or goes to stderr between cells; it does not end the context, as in a Jupyter kernel
const stray = (e) => { if (settle) settle(e); else process.stderr.write('Uncaught ' + String((e && e.stack) || e) + '\n'); };
process.on('uncaughtException', stray);
process.on('unhandledRejection', stray);
if (server._domain) {
  server._domain.removeAllListeners('error');
  server._domain.on('error', stray);
}
let interrupt = null;
process.on('SIGINT', () => { if (interrupt) interrupt(); });
const rl = readline.createInterface({ input: process.stdin });
const queue = [];
let busy = false;
rl.on('line', (l) => { queue.push(l); pump(); });
rl.on('close', () => process.exit(0));
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) await run(JSON.parse(queue.shift()));
  busy = false;
}
const mark = (stream, m) => new Promise((r) => stream.write(m + '\n', r));
const interrupted = () => ({ name: 'Interrupted', message: 'the execution was interrupted', stack: '' });
// import X, * as N, { a, b as c } from 'm' at a line's start: made dynamic, on the same line
let imports = 0;
const IMPORT = /^([ \t]*)import\s+(?:(?:([\w$]+)\s*,?\s*)?(?:\*\s*as\s+([\w$]+)|\{([^}]*)\})?\s*from\s*)?(['"][^'"\n]+['"])[ \t]*;?/gm;
const dynamicImports = (code) => code.replace(IMPORT, (all, indent, def, ns, named, spec) => {
  const m = '__nsbox_import_' + ++imports, parts = ['const ' + m + ' = await import(' + spec + ');'];
  if (def) parts.push('const ' + def + ' = ' + m + '.default;');
  if (ns) parts.push('const ' + ns + ' = ' + m + ';');
  if (named) parts.push('const {' + named.replace(/([\w$]+)\s+as\s+([\w$]+)/g, '$1: $2') + '} = ' + m + ';');
  return indent + parts.join(' ');
});
function needsRepl(code) {
  try {
    new vm.Script(code, { filename: 'cell' });
    return false;
  } catch (e) {
    return e instanceof SyntaxError && /await is only valid|import statement/.test(e.message);
  }
}
function replEval(code) {
  return new Promise((resolve, reject) => {
    let done = false;
    const end = (err, v) => {
      if (done) return;
      done = true;
      settle = interrupt = null;
      if (err instanceof repl.Recoverable) err = err.err;  // input cut short: its SyntaxError
      if (err) reject(err); else resolve(v);
    };
    settle = end;
    interrupt = () => end(interrupted());
    try { server.eval(dynamicImports(code), ctx, 'cell', end); } catch (e) { end(e); }
  });
}
async function run(req) {
  const saved = {};
  for (const [k, v] of Object.entries(req.env || {})) { saved[k] = process.env[k]; process.env[k] = v; }
  let msg = null;
  try {
    let v;
    const code = stripTypes(req.code);
    if (needsRepl(code)) {
      v = await replEval(code);
    } else {
      v = vm.runInContext(code, ctx, { filename: 'cell', breakOnSigint: true });
      if (v && typeof v.then === 'function')
        v = await Promise.race([v, new Promise((_, rej) => { interrupt = () => rej(interrupted()); settle = rej; })]);
    }
    if (v !== undefined) msg = { type: 'result', text: typeof v === 'string' ? v : util.inspect(v) };
  } catch (e) {
    const o = e !== null && typeof e === 'object';
    msg = { type: 'error', name: (o && e.name) || 'Error', value: o ? String(e.message) : String(e), traceback: (o && e.stack) || '' };
  } finally {
    interrupt = settle = null;
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
  }
  if (msg) out.write(JSON.stringify(msg) + '\n');
  out.write('{"type": "done"}\n');
  await mark(process.stdout, req.marker);
  await mark(process.stderr, req.marker);
}
"""

# The Java context: a JShell running each cell's snippets in its own JVM (executionEngine "local"),
# so that System.out and System.setProperty are the process's.  A request is a line on stdin,
# "MARKER BASE64(CODE) [NAME=BASE64(VALUE)...]": the execution's env vars, set as system properties
# as E2B's Java kernel does and put back after.  The cell's value (a String's as its text) or
# error goes to NSBOX_CI_FD as a JSON line, then {"type": "done"}, then the marker on stdout and on
# stderr.  SIGINT stops the running cell (JShell.stop); the context lives on.
JAVA_DRIVER = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import jdk.jshell.*;

public class NsboxJava {
    static PrintStream msg;
    static volatile boolean interrupted;

    public static void main(String[] args) throws Exception {
        msg = new PrintStream(new FileOutputStream("/proc/self/fd/" + System.getenv("NSBOX_CI_FD")), true, StandardCharsets.UTF_8);
        JShell js = JShell.builder().executionEngine("local").out(System.out).err(System.err).build();
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> { interrupted = true; js.stop(); });
        SourceCodeAnalysis sca = js.sourceCodeAnalysis();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Base64.Decoder b64 = Base64.getDecoder();
        for (String line; (line = in.readLine()) != null;) {
            String[] f = line.split(" ");
            Map<String, String> saved = new LinkedHashMap<>();
            interrupted = false;
            boolean failed = false;
            try {
                for (int i = 2; i < f.length; i++) {
                    int eq = f[i].indexOf('=');
                    String k = f[i].substring(0, eq);
                    if (!saved.containsKey(k))
                        saved.put(k, System.getProperty(k));
                    System.setProperty(k, new String(b64.decode(f[i].substring(eq + 1)), StandardCharsets.UTF_8));
                }
                failed = run(js, sca, f.length > 1 ? new String(b64.decode(f[1]), StandardCharsets.UTF_8) : "");
            } catch (Throwable t) {
                failed = true;
                error(t.getClass().getName(), String.valueOf(t.getMessage()), trace(t.getClass().getName(), t));
            } finally {
                for (Map.Entry<String, String> e : saved.entrySet())
                    if (e.getValue() == null) System.clearProperty(e.getKey()); else System.setProperty(e.getKey(), e.getValue());
            }
            if (interrupted && !failed)
                error("InterruptedException", "the cell was interrupted", "");
            System.out.flush();
            System.err.flush();
            msg.println("{\"type\": \"done\"}");
            System.out.println(f[0]);
            System.out.flush();
            System.err.println(f[0]);
            System.err.flush();
        }
        js.close();
    }

    // true when the cell ended in an error (said)
    static boolean run(JShell js, SourceCodeAnalysis sca, String code) {
        String rest = code;
        SnippetEvent last = null;
        while (!rest.isBlank() && !interrupted) {
            SourceCodeAnalysis.CompletionInfo ci = sca.analyzeCompletion(rest);
            String src;
            if (ci.completeness() == SourceCodeAnalysis.Completeness.EMPTY)
                break;
            if (ci.completeness().isComplete()) {
                src = ci.source();
                rest = ci.remaining();
            } else { // not a whole snippet: the compiler says what is missing
                src = rest;
                rest = "";
            }
            for (SnippetEvent e : js.eval(src)) {
                if (e.causeSnippet() != null)
                    continue; // another snippet this one's definition updated
                if (e.status() == Snippet.Status.REJECTED) {
                    StringBuilder sb = new StringBuilder();
                    js.diagnostics(e.snippet()).forEach(d -> sb.append(sb.length() > 0 ? "\n" : "").append(d.getMessage(Locale.ROOT)));
                    error("CompilationException", sb.toString(), src.strip());
                    return true;
                }
                if (e.exception() != null) {
                    JShellException x = e.exception();
                    String name = x instanceof EvalException ? ((EvalException) x).getExceptionClassName() : x.getClass().getSimpleName();
                    error(name, String.valueOf(x.getMessage()), trace(name, x));
                    return true;
                }
                last = e;
            }
        }
        if (last == null || last.value() == null || interrupted)
            return false;
        Snippet s = last.snippet();
        String type;
        switch (s.subKind()) {
        case TEMP_VAR_EXPRESSION_SUBKIND: type = ((VarSnippet) s).typeName(); break;
        case VAR_VALUE_SUBKIND: case ASSIGNMENT_SUBKIND: type = ((ExpressionSnippet) s).typeName(); break;
        default: return false; // a declaration or a statement: no value shown
        }
        String v = last.value();
        if (type.equals("String") && v.length() >= 2 && v.startsWith("\""))
            v = unquote(v);
        msg.println("{\"type\": \"result\", \"text\": " + json(v) + "}");
        return false;
    }

    static String trace(String name, Throwable t) {
        StringBuilder sb = new StringBuilder(name).append(": ").append(t.getMessage());
        for (StackTraceElement el : t.getStackTrace())
            sb.append("\n\tat ").append(el);
        return sb.toString();
    }

    static void error(String name, String value, String traceback) {
        msg.println("{\"type\": \"error\", \"name\": " + json(name) + ", \"value\": " + json(value) + ", \"traceback\": " + json(traceback) + "}");
    }

    // JShell's literal of a String value (\b \t \n \f \r \" \\ \' and octal escapes) back to its text
    static String unquote(String q) {
        StringBuilder sb = new StringBuilder();
        int end = q.length() - 1;
        for (int i = 1; i < end; i++) {
            char c = q.charAt(i);
            if (c != '\\' || i + 1 >= end) {
                sb.append(c);
                continue;
            }
            char n = q.charAt(++i);
            if (n >= '0' && n <= '7') {
                int v = 0;
                for (int k = 0; k < 3 && i < end && q.charAt(i) >= '0' && q.charAt(i) <= '7'; k++)
                    v = v * 8 + (q.charAt(i++) - '0');
                i--;
                sb.append((char) v);
                continue;
            }
            switch (n) {
            case 'b': sb.append('\b'); break;
            case 't': sb.append('\t'); break;
            case 'n': sb.append('\n'); break;
            case 'f': sb.append('\f'); break;
            case 'r': sb.append('\r'); break;
            default: sb.append(n); break;
            }
        }
        return sb.toString();
    }

    static String json(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }
}
"""



# Run in each Python kernel once it is up: E2B's two result formats of its own, as display
# formatters that import nothing until a DataFrame or a Figure is shown.  "e2b/data" is a
# DataFrame's columns ({name: [values]}, JSON-clean: NaN null, times ISO); "e2b/chart" is a
# matplotlib figure's data, in the shape @e2b/code-interpreter's Chart types name (line, scatter,
# bar, pie, box_and_whisker; several axes a superchart; anything else "unknown" with no elements).  Past
# SETUP_MAX_CELLS values neither is made.  Never raises: a failure is no such format.
KERNEL_SETUP = r"""
def __nsbox_setup(max_cells):
    import json, math, re
    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName

    ip = get_ipython()

    # by class name, in __call__: not a type printer, which the inline backend's setup takes
    # out of every formatter for Figure
    class Fmt(BaseFormatter):
        print_method = ObjectName("_repr_nsbox_unused_")
        _return_type = (dict,)

        def __call__(self, obj):
            for c in type(obj).__mro__:
                if (c.__module__, c.__name__) == self.nsbox_type:
                    try:
                        return self.nsbox_fn(obj)
                    except Exception:
                        return None
            return None

    def formatter(mime, module, name, fn):
        f = Fmt(parent=ip.display_formatter, format_type=mime)
        f.nsbox_type, f.nsbox_fn = (module, name), fn
        ip.display_formatter.formatters[mime] = f

    def frame_data(df):
        if df.size > max_cells:
            return None
        s = json.loads(df.to_json(orient="split", date_format="iso", default_handler=str))
        return {str(c): [row[i] for row in s["data"]] for i, c in enumerate(s["columns"])}

    def clean(v):
        if v is None or type(v).__name__ == "MaskedConstant":  # a scatter's NaN
            return None
        if hasattr(v, "isoformat"):
            return v.isoformat()
        if isinstance(v, str):
            return v
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        return f if math.isfinite(f) else None

    def unit(label):
        m = re.search(r"\s\((.*?)\)|\[(.*?)\]", label or "")
        return (m.group(1) or m.group(2)) if m else None

    def scale(ax, axis):
        conv = type(axis.converter).__name__ if axis.converter is not None else ""
        if "Date" in conv:
            return "datetime"
        if "StrCategory" in conv:
            return "categorical"
        return axis.get_scale()

    def axis_value(axis, sc, v):
        # a position on an axis as the user gave it: a category, a time, a number
        if sc == "categorical" and axis.units is not None:
            for k, i in axis.units._mapping.items():
                if i == v:
                    return k
        if sc == "datetime":
            from matplotlib.dates import num2date
            return num2date(float(v)).isoformat()
        return clean(v)

    def base(kind, ax):
        return {"type": kind, "title": ax.get_title() or None, "elements": []}

    def planar(kind, ax):
        c = base(kind, ax)
        xl, yl = ax.get_xlabel() or None, ax.get_ylabel() or None
        c.update(x_label=xl, y_label=yl, x_unit=unit(xl), y_unit=unit(yl))
        return c

    def ticks(c, ax):
        for n, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            sc = scale(ax, axis)
            c[n + "_scale"] = sc
            c[n + "_ticks"] = [axis_value(axis, sc, t) if sc == "datetime" else clean(t) for t in axis.get_ticklocs()]
            c[n + "_tick_labels"] = [t.get_text() for t in axis.get_ticklabels()]

    def kind_of(ax):
        from matplotlib.collections import PathCollection
        from matplotlib.lines import Line2D
        from matplotlib.patches import PathPatch, Rectangle, Wedge
        from matplotlib.text import Text
        objs = [o for o in ax.get_children() if o in ax._children and not isinstance(o, Text)]
        for kind, t in (("line", Line2D), ("box_and_whisker", (PathPatch, Line2D)), ("scatter", PathCollection), ("pie", Wedge),
                        ("bar", Rectangle)):
            if objs and all(isinstance(o, t) for o in objs):
                return kind
        return "unknown"

    def rounded(v):  # 8 significant digits, as E2B's: a quartile of 84.75000000000001 is 84.75
        v = float(v)
        return float("%.8g" % v) if math.isfinite(v) else None

    # ax.boxplot(..., patch_artist=True): each box a PathPatch from the first quartile to the
    # third; a line across its whole width the median; whiskers from its edges to the extremes;
    # fliers (no line style) the outliers.  Vertical when the lines of constant y (caps, medians)
    # outnumber those of constant x (whiskers).
    def box_chart(ax, budget):
        c = planar("box_and_whisker", ax)
        lines = [(l, [rounded(x) for x in l.get_xdata()], [rounded(y) for y in l.get_ydata()]) for l in ax.get_lines()]
        flat_y = sum(1 for _, xd, yd in lines if len(yd) == 2 and yd[0] == yd[1] and xd[0] != xd[1])
        flat_x = sum(1 for _, xd, yd in lines if len(xd) == 2 and xd[0] == xd[1] and yd[0] != yd[1])
        flip = flat_x > flat_y
        axis = ax.yaxis if flip else ax.xaxis
        where = [(float(t), l.get_text()) for t, l in zip(axis.get_ticklocs(), axis.get_ticklabels())]
        boxes = []
        for p in ax.patches:
            v = p.get_path().vertices
            xs, ys = [rounded(a) for a in v[:, 1 if flip else 0]], [rounded(a) for a in v[:, 0 if flip else 1]]
            budget[0] -= len(xs)
            if budget[0] < 0:
                raise OverflowError
            x, y = min(xs), min(ys)
            label = next((t for at, t in where if x <= at <= max(xs)), None)
            boxes.append({"x": x, "w": max(xs) - x, "y": y, "h": max(ys) - y, "label": label if label is not None else str(len(boxes) + 1),
                          "median": None, "lo": None, "hi": None, "outliers": []})
        for l, xd, yd in lines:
            if flip:
                xd, yd = yd, xd
            budget[0] -= len(xd)
            if budget[0] < 0:
                raise OverflowError
            if not xd:
                continue
            box = next((b for b in boxes if b["x"] <= min(xd) and max(xd) <= b["x"] + b["w"]), None)
            if box is None:
                continue
            if l.get_linestyle() in ("None", "", " "):  # fliers
                box["outliers"].extend(y for y in yd if y is not None)
            elif len(yd) == 2 and yd[0] == yd[1] and min(xd) == box["x"] and max(xd) == box["x"] + box["w"]:
                box["median"] = yd[0]
            elif len(yd) == 2 and xd[0] == xd[1]:
                if max(yd) == box["y"]:
                    box["lo"] = min(yd)
                elif min(yd) == box["y"] + box["h"]:
                    box["hi"] = max(yd)
        if flip:
            c["x_label"], c["y_label"], c["x_unit"], c["y_unit"] = c["y_label"], c["x_label"], c["y_unit"], c["x_unit"]
        for b in sorted(boxes, key=lambda b: b["x"]):
            q1, q3 = b["y"], rounded(b["y"] + b["h"])
            c["elements"].append({"label": b["label"], "min": b["lo"] if b["lo"] is not None else q1, "first_quartile": q1,
                                  "median": b["median"], "third_quartile": q3, "max": b["hi"] if b["hi"] is not None else q3,
                                  "outliers": b["outliers"]})
        return c

    def chart_of_axes(ax, budget):
        kind = kind_of(ax)
        if kind == "box_and_whisker":
            return box_chart(ax, budget)
        if kind == "line" or kind == "scatter":
            c = planar(kind, ax)
            ticks(c, ax)
            xs, ys = c["x_scale"], c["y_scale"]
            if kind == "line":
                series = [(l.get_label(), zip(l.get_xdata(), l.get_ydata())) for l in ax.get_lines()]
            else:
                series = [(p.get_label(), ((axis_value(ax.xaxis, xs, x), axis_value(ax.yaxis, ys, y)) for x, y in p.get_offsets()))
                          for p in ax.collections]
            for label, pts in series:
                points = []
                for x, y in pts:
                    budget[0] -= 1
                    if budget[0] < 0:
                        raise OverflowError
                    points.append([clean(x), clean(y)])
                c["elements"].append({"label": label, "points": points})
            return c
        if kind == "bar":
            c = planar(kind, ax)
            flip = False
            for n, cont in enumerate(ax.containers):
                group = cont.get_label()
                if not group or group.startswith("_"):
                    group = "Group %d" % n
                flip = getattr(cont, "orientation", "vertical") == "horizontal"
                axis = ax.yaxis if flip else ax.xaxis
                sc = scale(ax, axis)
                where = {round(float(t), 6): l.get_text() for t, l in zip(axis.get_ticklocs(), axis.get_ticklabels())}
                for r in cont:
                    at = r.get_y() + r.get_height() / 2 if flip else r.get_x() + r.get_width() / 2
                    label = axis_value(axis, sc, at) if sc == "categorical" else where.get(round(at, 6)) or str(clean(at))
                    c["elements"].append({"label": str(label), "group": group, "value": clean(r.get_width() if flip else r.get_height())})
            if flip:
                c["x_label"], c["y_label"], c["x_unit"], c["y_unit"] = c["y_label"], c["x_label"], c["y_unit"], c["x_unit"]
            return c
        if kind == "pie":
            c = base(kind, ax)
            for w in ax.patches:
                c["elements"].append({"label": w.get_label(), "angle": abs(round(w.theta2 - w.theta1, 4)), "radius": clean(w.r)})
            return c
        return base("unknown", ax)

    def figure_chart(fig):
        axes = fig.get_axes()
        budget = [max_cells]
        try:
            if len(axes) == 1:
                return chart_of_axes(axes[0], budget)
            if axes:
                title = fig._suptitle.get_text() if fig._suptitle is not None else None
                return {"type": "superchart", "title": title or None, "elements": [chart_of_axes(a, budget) for a in axes]}
        except OverflowError:
            pass
        return None

    formatter("e2b/data", "pandas.core.frame", "DataFrame", frame_data)
    formatter("e2b/chart", "matplotlib.figure", "Figure", figure_chart)

    # PIL, as E2B's kernels have it: image.save("x.png") also shows the image, and image.show()
    # shows it here instead of starting a desktop viewer.  Done when a cell imports PIL.Image,
    # not at start: importing PIL costs a kernel 25 ms.
    import sys
    from importlib.machinery import PathFinder

    def patch_pil(m):
        from IPython.display import display
        save = m.Image.save

        def save_shown(image, fp, format=None, **params):
            if isinstance(fp, str):
                display(image)
            return save(image, fp, format, **params)

        m.Image.save = save_shown
        try:
            from PIL import ImageShow
            ImageShow.UnixViewer.show_file = lambda self, path, **options: 0
        except Exception:
            pass

    class PilHook:
        def find_spec(self, name, path, target=None):
            if name != "PIL.Image":
                return None
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            spec = PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                try:
                    patch_pil(module)
                except Exception:
                    pass

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, PilHook())

""" + "__nsbox_setup(%d)\ndel __nsbox_setup\n" % SETUP_MAX_CELLS


class ProcKernel:
    """A bash, node or JShell process that keeps its state between cells (not a Jupyter kernel)."""

    def __init__(self, language, cwd):
        self.language = language
        self.events = queue.Queue()   # (kind, bytes): "stdout", "stderr", "msg" (fd 3), "eof"
        self.count = 0
        self.tmp = tempfile.mkdtemp(prefix="nsbox-ctx-")
        env = dict(os.environ, TERM="dumb")
        if language == "bash":
            argv, fds = ["/bin/bash", "--norc", "--noprofile", "-s"], ()
        elif language == "java":
            java = shutil.which("java")
            if not java or not shutil.which("jshell"):  # JShell is the JDK's, not the JRE's
                raise ApiError(400, "java contexts need a JDK with JShell, which this sandbox has not "
                               "(on the host: apt-get install openjdk-17-jdk-headless)")
            driver = os.path.join(self.tmp, "NsboxJava.java")
            with open(driver, "w") as f:
                f.write(JAVA_DRIVER)
            r3, w3 = os.pipe()
            # no hsperfdata files in /tmp; the source launcher compiles the driver in memory
            argv, fds = [java, "-XX:-UsePerfData", driver], (w3,)
            env["NSBOX_CI_FD"] = str(w3)
        else:
            node = shutil.which("node")
            if not node:
                raise ApiError(400, "%s contexts need node, which this sandbox has not" % language)
            if language == "typescript":
                tsc = next((c for c in TS_COMPILERS if os.path.isfile(c)), None)
                if not tsc:
                    raise ApiError(400, "typescript contexts need the TypeScript compiler, which this sandbox "
                                   "has not (on the host: apt-get install node-typescript)")
                env["NSBOX_CI_TS"] = tsc
            r3, w3 = os.pipe()
            argv, fds = [node, "-e", JS_DRIVER], (w3,)
            env["NSBOX_CI_FD"] = str(w3)
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, cwd=cwd, env=env, pass_fds=fds,
                                  start_new_session=True)
        readers = [(self.p.stdout, "stdout"), (self.p.stderr, "stderr")]
        if fds:
            os.close(w3)
            readers.append((os.fdopen(r3, "rb", buffering=0), "msg"))
        for f, kind in readers:
            threading.Thread(target=self._read, args=(f, kind), daemon=True).start()
        # what a shell says as it starts (no job control, ...) is no cell's
        marker = uuid.uuid4().hex
        if language == "bash":
            # a SIGINT ends the cell (the sourced file returns), not the shell
            self.resync(marker, "trap 'return 130 2>/dev/null' INT")
        else:
            self.request("undefined" if language != "java" else "0", {}, marker)
        if not self.wait(marker, time.monotonic() + KERNEL_START_S):
            self.shutdown()
            raise RuntimeError("the %s context did not start" % language)

    def wait(self, marker, deadline):
        """Drops output until the marker came on both streams (and fd 3's done for node)."""
        need = {"stdout", "stderr"} | ({"msg"} if self.language != "bash" else set())
        bufs = {"stdout": b"", "stderr": b""}
        end = ("%s\n" % marker).encode()
        while need and time.monotonic() < deadline:
            try:
                kind, data = self.events.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "eof":
                return False
            if kind == "msg":
                if b'"done"' in data:
                    need.discard("msg")
                continue
            bufs[kind] += data
            if end in bufs[kind]:
                need.discard(kind)
        return not need

    def _read(self, f, kind):
        while True:
            data = f.readline() if kind == "msg" else os.read(f.fileno(), 65536)
            if not data:
                self.events.put(("eof", kind))
                return
            self.events.put((kind, data))

    def send(self, data):
        try:
            self.p.stdin.write(data)
            self.p.stdin.flush()
        except OSError:
            pass

    def alive(self):
        return self.p.poll() is None

    def interrupt(self):
        try:
            # bash: its cell's processes; node: breakOnSigint ends the running script
            os.killpg(self.p.pid, signal.SIGINT) if self.language == "bash" else self.p.send_signal(signal.SIGINT)
        except OSError:
            pass

    def shutdown(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except OSError:
            pass
        self.p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cell(self, code, envs, marker):
        """Sends one cell; its end is the marker on both streams (and, for node, fd 3's done)."""
        self.count += 1
        if self.language == "bash":
            path = os.path.join(self.tmp, "cell.sh")
            with open(path, "w") as f:
                f.write(code + "\n")
            pre = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in envs.items())
            # the cell's standard input is not the shell's, which carries the cells
            self.resync(marker, "%s source %s < /dev/null" % (pre, shlex.quote(path)))
        else:
            self.request(code, envs, marker)

    def request(self, code, envs, marker):
        """A cell for node (a JSON line) or JShell (marker, then base64 words: names are
        [A-Za-z_][A-Za-z0-9_]*)."""
        if self.language == "java":
            b64 = lambda s: base64.b64encode(s.encode(errors="replace")).decode()
            words = [marker, b64(code)] + ["%s=%s" % (k, b64(v)) for k, v in envs.items()]
            self.send((" ".join(words) + "\n").encode())
        else:
            self.send((json.dumps({"code": code, "env": envs, "marker": marker}) + "\n").encode())

    def resync(self, marker, before=""):
        """bash: a command line, then the marker on stdout and stderr."""
        line = "%s; printf '%%s\\n' %s; printf '%%s\\n' %s >&2\n" % (before or ":", marker, marker)
        self.send(line.encode())


class Context:
    """One kernel.  `lock` serialises executions: a kernel runs one cell at a time."""

    def __init__(self, language, cwd, lazy=False):
        self.id = uuid.uuid4().hex
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self.km = self.kc = self.proc = None
        self.started = False
        if not lazy:
            self.start()

    def start(self):
        self.started = True
        if self.language not in ("python", "r"):
            self.proc = ProcKernel(self.language, self.cwd)
            return
        from jupyter_client import KernelManager
        from jupyter_client.kernelspec import NoSuchKernel
        self.proc = None
        # a manager per kernel: shutting one down ends its ZeroMQ context for good
        self.km = KernelManager(kernel_name="python3" if self.language == "python" else "ir")
        try:
            spec = self.km.kernel_spec
        except NoSuchKernel:
            self.started = False
            raise ApiError(400, "r contexts need R's Jupyter kernel, which this sandbox has not "
                           "(on the host: apt-get install r-cran-irkernel)")
        if self.language == "python":
            # the kernel runs this very interpreter (Debian's, with ipykernel), not a PATH python3
            spec.argv[0] = sys.executable
        self.km.start_kernel(cwd=self.cwd, independent=False)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=KERNEL_START_S)
        except Exception:
            self.shutdown()
            raise
        if self.language == "python":
            self.silent(KERNEL_SETUP)

    def silent(self, code):
        """Code of ours (the setup, environment variables): run, wait, show nothing."""
        mid = self.kc.execute(code, silent=True, store_history=False)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                msg = self.kc.get_shell_msg(timeout=0.5)
            except queue.Empty:
                if not self.alive():
                    return
                continue
            if msg["parent_header"].get("msg_id") == mid:
                return

    def restart(self):
        self.shutdown()
        self.start()

    def shutdown(self):
        if not self.started:
            return
        try:
            if self.proc:
                self.proc.shutdown()
                return
            if self.kc:
                self.kc.stop_channels()
            self.km.shutdown_kernel(now=True)
        except Exception:  # a kernel already gone is shut down
            pass

    def alive(self):
        if not self.started:
            return True  # nothing ran, nothing died
        return self.proc.alive() if self.proc else self.km.is_alive()

    def interrupt(self):
        if not self.started:
            return
        if self.proc:
            self.proc.interrupt()
        else:
            self.km.interrupt_kernel()

    def json(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


class Contexts:
    def __init__(self, cwd):
        self.cwd = cwd
        self.lock = threading.Lock()
        self.all = {}
        self.defaults = {}          # language -> its default context

    def create(self, language, cwd, lazy=False):
        lang = normal_language(language)
        cwd = cwd or self.cwd
        if not isinstance(cwd, str) or not cwd.startswith("/") or len(cwd) > 4096:
            raise ApiError(400, "'cwd' must be an absolute path: %r" % (cwd,))
        try:
            os.makedirs(cwd, exist_ok=True)  # as the sandbox's user, where it may write
        except OSError as e:
            raise ApiError(400, "'cwd' %r cannot be made: %s" % (cwd, e.strerror))
        if not os.path.isdir(cwd):
            raise ApiError(400, "'cwd' must be a directory: %r" % (cwd,))
        with self.lock:
            if len(self.all) >= MAX_CONTEXTS:
                raise ApiError(429, "at most %d contexts per sandbox; delete one first" % MAX_CONTEXTS)
            self.all[None] = None  # a place held while the kernel starts
            ctx = None
        try:
            ctx = Context(lang, cwd, lazy)
        finally:
            with self.lock:
                del self.all[None]
                if ctx:
                    self.all[ctx.id] = ctx
        return ctx

    def get(self, cid):
        with self.lock:
            ctx = self.all.get(cid) if isinstance(cid, str) else None
        if not ctx:
            raise ApiError(404, "context '%s' not found" % str(cid)[:100])
        return ctx

    def default_context(self, language="python", lazy=False):
        with self.lock:
            ctx = self.defaults.get(language)
            ctx = ctx if ctx and ctx.id in self.all else None
        if not ctx:
            ctx = self.create(language, None, lazy)
            self.defaults[language] = ctx
        return ctx

    def remove(self, cid):
        ctx = self.get(cid)
        with self.lock:
            self.all.pop(ctx.id, None)
        ctx.shutdown()

    def list(self):
        with self.lock:
            return [c.json() for c in self.all.values() if c]

    def shutdown(self):
        with self.lock:
            every = [c for c in self.all.values() if c]
            self.all.clear()
        for c in every:
            c.shutdown()


def normal_language(language):
    if language is None or language == "":
        return "python"
    if not isinstance(language, str):
        raise ApiError(400, "'language' must be a string")
    if language.lower() not in LANGUAGES:
        raise ApiError(400, "language '%s' is not supported: nsbox's code interpreter runs python, r, "
                       "javascript, typescript, java and bash" % language[:50])
    return LANGUAGES[language.lower()]


def result_line(data, main):
    """A Jupyter MIME bundle as E2B's result line."""
    data = dict(data)
    out = {"type": "result", "is_main_result": main}
    text = data.pop("text/plain", None)
    if isinstance(text, str) and len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        text = text[1:-1]  # E2B shows a str result without its quotes
    names = (("html", "text/html"), ("markdown", "text/markdown"), ("svg", "image/svg+xml"),
             ("png", "image/png"), ("jpeg", "image/jpeg"), ("pdf", "application/pdf"),
             ("latex", "text/latex"), ("json", "application/json"),
             ("javascript", "application/javascript"), ("data", "e2b/data"), ("chart", "e2b/chart"))
    if text is not None:
        out["text"] = text
    for key, mime in names:
        if mime in data:
            out[key] = data.pop(mime)
    if data:
        out["extra"] = data
    return out


class Execution:
    """One cell: the kernel's iopub messages for it, as lines written by `emit`."""

    def __init__(self, ctx, emit, gone, timeout):
        self.ctx, self.emit, self.gone = ctx, emit, gone
        self.deadline = time.monotonic() + timeout if timeout else None
        self.sent = 0
        self.truncated = False
        self.count = None           # the cell's execution count, once the kernel said it
        self.last = time.monotonic()
        self.errored = False        # the kernel reported the cell's error

    def line(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        if self.sent + len(data) > MAX_OUTPUT and obj.get("type") in ("stdout", "stderr", "result"):
            if not self.truncated:
                self.truncated = True
                self.emit(b'{"type": "stderr", "text": "[nsbox: output over %d bytes left out]\\n"}\n' % MAX_OUTPUT)
            return
        self.sent += len(data)
        self.last = time.monotonic()
        self.emit(data)

    def silent(self, code):
        self.ctx.silent(code)

    def run(self, code):
        kc = self.ctx.kc
        mid = kc.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        interrupted_at = None
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                msg = None
            if msg is not None and msg["parent_header"].get("msg_id") == mid:
                if self.handle(msg):
                    if interrupted_at is not None and not self.errored:
                        # IRkernel ends an interrupted cell without an error: say it, as ipykernel does
                        self.line({"type": "error", "name": "KeyboardInterrupt", "value": "the cell was interrupted",
                                   "traceback": ""})
                    break
                continue
            if not self.ctx.alive():
                self.line({"type": "error", "name": "DeadKernelError",
                           "value": "the kernel of context %s died; the next cell starts a new one" % self.ctx.id, "traceback": ""})
                return
            now = time.monotonic()
            if self.count is not None and now - self.last > HEARTBEAT_S:
                # a silent cell still writes: a client gone behind a proxy is found out (the
                # proxy closes our side once its write fails); the SDKs take the line again
                self.line({"type": "number_of_executions", "execution_count": self.count})
            if interrupted_at is None and ((self.deadline and now > self.deadline) or self.gone()):
                self.ctx.interrupt()
                interrupted_at = now
            elif interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_S:
                # a cell that ignores SIGINT: the kernel is restarted, the context stays
                self.ctx.restart()
                self.line({"type": "error", "name": "TimeoutError",
                           "value": "the cell did not stop when interrupted; the context was restarted",
                           "traceback": ""})
                return
        # the shell reply, so the next cell's first message is its own
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                if kc.get_shell_msg(timeout=0.5)["parent_header"].get("msg_id") == mid:
                    break
            except queue.Empty:
                pass

    def run_proc(self, code, envs):
        """A bash or node cell: its streams as they come, up to the marker on each."""
        k = self.ctx.proc
        marker = uuid.uuid4().hex
        end = ("%s\n" % marker).encode()
        k.cell(code, envs, marker)
        self.count = k.count
        self.line({"type": "number_of_executions", "execution_count": k.count})
        need = {"stdout", "stderr"} | ({"msg"} if k.language != "bash" else set())
        bufs = {"stdout": b"", "stderr": b""}
        interrupted_at = None
        while need:
            try:
                kind, data = k.events.get(timeout=0.2)
            except queue.Empty:
                kind = data = None
            if kind == "msg":
                msg = json.loads(data)
                if msg.get("type") == "done":
                    need.discard("msg")
                elif msg.get("type") == "result":
                    self.line({"type": "result", "is_main_result": True, "text": msg.get("text")})
                else:
                    self.line(msg)
            elif kind in bufs:
                bufs[kind] += data
                if end in bufs[kind]:
                    bufs[kind] = bufs[kind].replace(end, b"")
                    need.discard(kind)
                # all but what could be the start of a marker goes now
                b = bufs[kind]
                cut = b.rfind(b"\n") + 1
                if kind not in need or not end.startswith(b[cut:]):
                    cut = len(b)
                text, bufs[kind] = b[:cut], b[cut:]
                if text:
                    self.line({"type": kind, "text": text.decode(errors="replace"), "timestamp": time.time()})
            elif kind == "eof" or not k.alive():
                self.line({"type": "error", "name": "DeadKernelError",
                           "value": "the %s of context %s ended; the next cell starts a new one" % (k.language, self.ctx.id),
                           "traceback": ""})
                return
            now = time.monotonic()
            if now - self.last > HEARTBEAT_S:
                self.line({"type": "number_of_executions", "execution_count": self.count})
            if interrupted_at is None and ((self.deadline and now > self.deadline) or self.gone()):
                k.interrupt()
                interrupted_at = now
                if k.language == "bash":
                    # the shell's trap goes on with the cell's next command, then the markers
                    self.line({"type": "error", "name": "KeyboardInterrupt", "value": "the cell was interrupted", "traceback": ""})
            elif interrupted_at is not None and now - interrupted_at > INTERRUPT_GRACE_S:
                self.ctx.restart()
                self.line({"type": "error", "name": "TimeoutError",
                           "value": "the cell did not stop when interrupted; the context was restarted",
                           "traceback": ""})
                return

    def handle(self, msg):
        kind, c = msg["msg_type"], msg["content"]
        if kind == "stream":
            name = "stderr" if c.get("name") == "stderr" else "stdout"
            self.line({"type": name, "text": c.get("text", ""), "timestamp": time.time()})
        elif kind == "execute_input":
            self.count = c.get("execution_count")
            self.line({"type": "number_of_executions", "execution_count": c.get("execution_count")})
        elif kind == "execute_result":
            self.line(result_line(c.get("data", {}), True))
        elif kind == "display_data":
            self.line(result_line(c.get("data", {}), False))
        elif kind == "error":
            self.errored = True
            self.line({"type": "error", "name": c.get("ename", ""), "value": c.get("evalue", ""),
                       "traceback": "\n".join(c.get("traceback", []))})
        elif kind == "status" and c.get("execution_state") == "idle":
            return True
        return False


# The sandbox's own environment variables (E2B's envVars at create).  A server started by the
# create has them in its environment, so every kernel has them; their names are in NSBOX_CI_ENVS,
# for Java cells, which get them as system properties (as E2B's kernel sets them).  A server
# started before the create (a warm pool) reads them from READY_FILE.envs, a JSON object of
# strings that nsboxd writes: every cell then sees them under its own env_vars, and contexts
# started afterwards in their environment.
ENVS = {"path": None, "seen": None, "vars": {}, "create": {}}


def create_envs():
    names = os.environ.pop("NSBOX_CI_ENVS", "").split()
    ENVS["create"] = {n: os.environ[n] for n in names[:MAX_ENV_VARS]
                    if n in os.environ and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)}


def sandbox_envs():
    path = ENVS["path"]
    try:
        st = os.stat(path) if path else None
    except OSError:
        st = None
    key = st and (st.st_mtime_ns, st.st_size, st.st_ino)
    if key and key != ENVS["seen"] and st.st_size <= (1 << 20):
        ENVS["seen"] = key
        try:
            with open(path) as f:
                got = json.load(f)
        except (OSError, ValueError):
            got = None
        if isinstance(got, dict) and len(got) <= MAX_ENV_VARS and all(
                isinstance(k, str) and isinstance(v, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)
                for k, v in got.items()):
            ENVS["vars"] = got
            os.environ.update(got)
    return ENVS["vars"]


def execute(contexts, req, emit, gone):
    code = req.get("code")
    if not isinstance(code, str):
        raise ApiError(400, "'code' must be a string")
    if len(code.encode()) > MAX_CODE:
        raise ApiError(413, "'code' is over %d bytes" % MAX_CODE)
    cid, language = req.get("context_id"), req.get("language")
    if cid is not None and language is not None:
        raise ApiError(400, "give 'context_id' or 'language', not both")
    envs = req.get("env_vars") or {}
    if not isinstance(envs, dict) or len(envs) > MAX_ENV_VARS or not all(
            isinstance(k, str) and isinstance(v, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)
            for k, v in envs.items()):
        raise ApiError(400, "'env_vars' must be an object of at most %d strings" % MAX_ENV_VARS)
    timeout = req.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0):
        raise ApiError(400, "'timeout' must be a number of seconds")
    if cid is not None:
        ctx = contexts.get(cid)
    else:
        ctx = contexts.default_context(normal_language(language))
    # the create's own variables are the environment of every kernel but Java's properties
    base = dict(ENVS["create"], **sandbox_envs()) if ctx.language == "java" else sandbox_envs()
    return ctx, code, dict(base, **envs), timeout


def env_code(language, envs):
    """A Jupyter kernel's code that sets an execution's env_vars, keeping the values they replace
    (envs), or that puts those values back (None).  Names are [A-Za-z_][A-Za-z0-9_]*; values go in
    as JSON strings, which Python and R both read as string literals."""
    if language == "python":
        if envs is None:
            return ("import os as __o\nfor __k, __v in __nsbox_env.items():\n"
                    "    __o.environ.pop(__k, None) if __v is None else __o.environ.__setitem__(__k, __v)\n"
                    "del __nsbox_env, __o")
        return ("import os as __o; __nsbox_env = {k: __o.environ.get(k) for k in %r}; "
                "__o.environ.update(%r)" % (list(envs), envs))
    if envs is None:
        return ("for (.k in names(.nsbox_env)) { if (is.na(.nsbox_env[[.k]])) Sys.unsetenv(.k) else "
                "do.call(Sys.setenv, setNames(list(.nsbox_env[[.k]]), .k)) }; rm(.nsbox_env, .k)")
    names = ", ".join(json.dumps(k) for k in envs)
    values = ", ".join("%s = %s" % (k, json.dumps(v, ensure_ascii=False)) for k, v in envs.items())
    return ".nsbox_env <- Sys.getenv(c(%s), unset = NA, names = TRUE); Sys.setenv(%s)" % (names, values)


def run_locked(ctx, code, envs, timeout, emit, gone):
    with ctx.lock:
        ex = Execution(ctx, emit, gone, timeout)
        if not ctx.started:  # a default context listed before its first cell (javascript)
            try:
                ctx.start()
            except Exception as e:
                ex.line({"type": "error", "name": "KernelStartError",
                         "value": "the %s kernel of context %s did not start: %s" % (ctx.language, ctx.id, e), "traceback": ""})
                ex.line({"type": "end_of_execution"})
                return
        if not ctx.alive():
            # as Jupyter's restarter does: a kernel that died is started again for the next cell
            try:
                ctx.restart()
            except Exception as e:
                ex.line({"type": "error", "name": "DeadKernelError",
                         "value": "the kernel of context %s died and did not start again: %s" % (ctx.id, e), "traceback": ""})
                ex.line({"type": "end_of_execution"})
                return
            ex.line({"type": "stderr", "text": "[nsbox: the kernel of this context had died; this cell runs in a new one, "
                     "without the old one's state]\n", "timestamp": time.time()})
        if ctx.proc:
            ex.run_proc(code, envs)
        else:
            if envs:
                ex.silent(env_code(ctx.language, envs))
            try:
                ex.run(code)
            finally:
                if envs and ctx.alive():
                    ex.silent(env_code(ctx.language, None))
        ex.line({"type": "end_of_execution"})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nsbox-code-interpreter"

    def log_message(self, fmt, *args):  # quiet: nsboxd keeps the sandbox's own logs
        pass

    def answer(self, status, obj=None):
        body = b"" if obj is None else (json.dumps(obj) + "\n").encode()
        self.send_response(status)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline(100).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline(100)
                    break
                if len(data) + size > MAX_BODY:
                    self.close_connection = True
                    raise ApiError(413, "the request body is over %d bytes" % MAX_BODY)
                data += self.rfile.read(size)
                self.rfile.readline(100)
        else:
            n = int(self.headers.get("Content-Length") or 0)
            if n < 0 or n > MAX_BODY:
                self.close_connection = True
                raise ApiError(413, "the request body is over %d bytes" % MAX_BODY)
            data = self.rfile.read(n) if n else b""
        if not data.strip():
            return {}
        try:
            obj = json.loads(data)
        except ValueError as e:
            raise ApiError(400, "the body is not JSON: %s" % e)
        if not isinstance(obj, dict):
            raise ApiError(400, "the body must be a JSON object")
        return obj

    def route(self):
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        cs = self.server.contexts
        m = self.command
        if path == "/health" and m == "GET":
            return self.answer(200, {"status": "ok"})
        if path == "/execute" and m == "POST":
            return self.execute(cs)
        if path == "/contexts" and m == "POST":
            b = self.body()
            sandbox_envs()  # a new context's kernel inherits them
            return self.answer(200, cs.create(b.get("language"), b.get("cwd")).json())
        if path == "/contexts" and m == "GET":
            return self.answer(200, cs.list())
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "contexts" and m == "DELETE":
            cs.remove(parts[2])
            return self.answer(204)
        if len(parts) == 4 and parts[1] == "contexts" and parts[3] == "restart" and m == "POST":
            ctx = cs.get(parts[2])
            with ctx.lock:
                ctx.restart()
            return self.answer(204)
        raise ApiError(404, "%s %s is not part of the code interpreter's API" % (m, path[:100]))

    def gone(self):
        """The client closed its connection (the SDK's timeoutMs aborts the request)."""
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            return bool(r) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def execute(self, cs):
        ctx, code, envs, timeout = execute(cs, self.body(), None, None)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        broken = [False]

        def emit(data):
            if broken[0]:
                return
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError:
                broken[0] = True

        run_locked(ctx, code, envs, timeout, emit, lambda: broken[0] or self.gone())
        if not broken[0]:
            emit(b"")  # the last chunk
        else:
            self.close_connection = True

    def dispatch(self):
        try:
            self.route()
        except ApiError as e:
            self.answer(e.status, {"error": str(e), "message": str(e)})
        except Exception as e:  # a failure of ours (a kernel that would not start): said, not hidden
            self.close_connection = True
            try:
                self.answer(500, {"error": "%s: %s" % (type(e).__name__, e), "message": str(e)})
            except OSError:
                pass

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = dispatch


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description="nsbox code interpreter (E2B's API on a port)")
    ap.add_argument("--listen", default="127.0.0.1:49999", help="address:port (127.0.0.1:49999)")
    ap.add_argument("--cwd", default=None, help="the default context's directory (/home/user, else the current one)")
    ap.add_argument("--ready-file", default=None, help="written once the default context answers")
    a = ap.parse_args()
    ENVS["path"] = a.ready_file and a.ready_file + ".envs"
    create_envs()
    host, _, port = a.listen.rpartition(":")
    cwd = a.cwd or ("/home/user" if os.path.isdir("/home/user") else os.getcwd())
    t0 = time.monotonic()
    cs = base = srv = None
    try:
        base = _runtime_env()
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        # a SIGINT ignored here (a background start) would be ignored by every kernel too
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # bound first: the kernel's ZeroMQ connections take ephemeral ports, and 49999 lies
        # in Linux's ephemeral range; a connection made first could hold it.  Until
        # serve_forever, a client waits in the listen backlog.
        srv = Server((host or "127.0.0.1", int(port)), Handler)
        cs = Contexts(cwd)
        cs.default_context()  # started before the server answers: healthy means ready
        if shutil.which("node"):  # listed from the start, as E2B's; its node starts at its first cell
            cs.default_context("javascript", lazy=True)
    except Exception as e:
        # said where the one starting us (nsboxd's template) looks, and on stderr
        why = "the code interpreter did not start: %s: %s" % (type(e).__name__, e)
        if isinstance(e, ImportError):
            why += " (the host needs python3-ipykernel and python3-jupyter-client)"
        if cs:
            cs.shutdown()
        if srv:
            srv.server_close()
        if base:
            shutil.rmtree(base, ignore_errors=True)
        print(why, file=sys.stderr)
        if a.ready_file:
            with open(a.ready_file + ".failed", "w") as f:
                f.write(why + "\n")
        sys.exit(1)
    srv.contexts = cs
    if a.ready_file:
        with open(a.ready_file + ".tmp", "w") as f:
            f.write("%d %.3f\n" % (os.getpid(), time.monotonic() - t0))
        os.rename(a.ready_file + ".tmp", a.ready_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        cs.shutdown()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
