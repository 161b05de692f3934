#!/usr/bin/env bash
# The README's shell examples, taken from the README itself so that they cannot drift: each
# fenced block right after a line `<!-- test: readme -->` (or `<!-- test: readme setup=NAME -->`,
# a fixture below made first, which may check instead what a caller who cannot run the block
# gets, or skip it).  Its
# `$ ` lines run in order in one bash, in a scratch directory,
# with nsbox on PATH; the lines after one, up to the next `$ `, are its documented output, which
# the output (stdout and stderr, nsbox's warnings left out) must match: a 32-digit id stands for
# any id, a run of spaces for any, an age or pid for any number, a line `...` for any lines,
# and `...` in a line for any text.  A `$ ` line ending in a backslash goes on on the next line.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

README=${NSBOX_SRC:-$(dirname "$0")/../..}/README.md
# A daemon of our own on a socket of our own, stopped with its sandboxes when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-readme.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock" NSBOX_STORE="$SESSION_DIR/store"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT
export PATH="$(cd "$(dirname "$NSBOX")" && pwd):$PATH"

# The marked blocks, as JSON: [{"line": N, "setup": NAME, "steps": [[cmd, [expected...]], ...]}]
BLOCKS=$(python3 - "$README" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().split("\n")
blocks, i = [], 0
while i < len(lines):
    m = re.match(r"<!-- test: readme(?: setup=(\w+))? -->$", lines[i].strip())
    if not m:
        i += 1
        continue
    j = i + 1
    if j >= len(lines) or not lines[j].startswith("```"):
        sys.exit("README.md:%d: a test: readme mark not followed by a fence" % (i + 1))
    steps, j = [], j + 1
    while j < len(lines) and not lines[j].startswith("```"):
        if lines[j].startswith("$ "):
            steps.append([lines[j][2:], []])
        elif steps and not steps[-1][1] and steps[-1][0].endswith("\\"):
            steps[-1][0] += "\n" + lines[j]  # a continued command
        elif steps:
            steps[-1][1].append(lines[j])
        j += 1
    blocks.append({"line": i + 2, "setup": m.group(1), "steps": steps})
    i = j
print(json.dumps(blocks))
PY
) || { echo "cannot read $README" >&2; exit 1; }

setup_repo() { # the examples' project: a git repository with one commit
        git init -q . && echo "# demo" > README && git add README &&
                git -c user.name=demo -c user.email=demo@example.com commit -qm init
}

setup_project() { # the snapshot example's: make deps builds build/deps, make test prints it
        printf 'deps:\n\tmkdir -p build && echo built > build/deps\ntest:\n\t@cat build/deps && python3 -c "print(2 + 2)"\n' > Makefile
        git init -q . && git add Makefile && git -c user.name=demo -c user.email=demo@example.com commit -qm deps &&
                echo "# demo" > README && git add README && git -c user.name=demo -c user.email=demo@example.com commit -qm readme
}

setup_calc() { # the project of the persistent sandboxes example: add() with a bug
        printf 'def add(a, b):\n    return a - b\n' > calc.py
}

setup_client() { # the Python client "From a program" shows, as client.py: the README's own
        python3 - "$README" > client.py <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
i = lines.index("import base64, json, os, pwd, socket")
j = lines.index("```", i)
print("\n".join(lines[i:j]))
PY
}

setup_limits() { # the resource limits example: cgroups the caller may use (a user: delegated)
        local out st
        out=$(nsbox run --memory 64M --pids 64 --cpus 0.5 -- true 2>&1)
        st=$?
        [ $st = 0 ] && return 0
        # "As a user, this needs a delegated cgroup": without one, the README's first line is
        # refused, in one line saying how to delegate; the block itself cannot run here
        [ $st = 125 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ $out == *"not delegated to uid $(id -u)"*"HOST SETUP in nsbox(1)"* ]] ||
                { echo "limits refused unlike the README says (status $st): $out" >&2; return 1; }
        return 78
}

# Run block N (index in BLOCKS) and compare each step's output with the README's.
run_block() {
        local n=$1 dir="$TEST_TMP/block$1" script="$TEST_TMP/block$1.sh" out setup st
        mkdir -p "$dir" && chmod 755 "$TEST_TMP" "$dir"
        setup=$(printf '%s' "$BLOCKS" | python3 -c 'import json, sys; print(json.load(sys.stdin)['"$n"']["setup"] or "")')
        (cd "$dir" && { [ -z "$setup" ] || "setup_$setup"; })
        st=$?
        [ $st = 77 ] && exit 77 # the fixture said why it skips
        [ $st = 78 ] && return 0 # the fixture checked what this caller gets instead
        [ $st = 0 ] || fail "setup $setup"
        # each step's output after a marker line; the block's sandboxes removed at the end
        printf '%s' "$BLOCKS" | python3 -c '
import json, sys
b = json.load(sys.stdin)[int(sys.argv[1])]
for k, (cmd, _) in enumerate(b["steps"]):
    print("echo @@step %d" % k)
    print(cmd)
' "$n" > "$script"
        out=$(cd "$dir" && bash "$script" 2>&1)
        [ -z "$(nsbox ls -q)" ] || nsbox rm -f $(nsbox ls -q) > /dev/null
        printf '%s' "$BLOCKS" | OUT="$out" python3 -c '
import json, os, re, sys
b = json.load(sys.stdin)[int(sys.argv[1])]
got, k = {}, None
for l in os.environ["OUT"].split("\n"):
    m = re.match(r"@@step (\d+)$", l)
    if m:
        k = int(m.group(1)); got[k] = []
    elif k is not None and not l.startswith("nsbox: warning:"):
        got[k].append(l)
def pattern(e):
    if e.strip() == "...":
        return None
    p = re.escape(e.strip())
    p = p.replace(r"\.\.\.", ".*")  # text left out
    p = re.sub(r"[0-9a-f]{32}", "[0-9a-f]{32}", p)
    p = re.sub(r"(\\\s)+", r"\\s+", p)
    p = re.sub(r"\b\d+s\b", r"[0-9]+[smh]", p)
    p = re.sub(r"\b\d{3,}\b", r"[0-9]+", p) if re.match(r"pid\b", e.strip()) else p
    return p
def match(exp, act):
    if not exp:
        return not act
    if pattern(exp[0]) is None:
        return any(match(exp[1:], act[i:]) for i in range(len(act) + 1))
    return bool(act) and re.fullmatch(pattern(exp[0]), act[0].strip()) is not None and match(exp[1:], act[1:])
for k, (cmd, exp) in enumerate(b["steps"]):
    act = got.get(k)
    if act is None:
        sys.exit("README.md:%d: $ %s\n  never ran (the block stopped before it)" % (b["line"], cmd))
    while act and act[-1] == "":
        act.pop()
    if not match(exp, act):
        sys.exit("README.md:%d: $ %s\n  documented:\n%s\n  got:\n%s" % (b["line"], cmd, "\n".join("    " + e for e in exp),
                 "\n".join("    " + a for a in act)))
' "$n" || fail "a README example differs (above)"
}

# The service configuration the README shows (root's, with "clients"): as the README says, a
# user's nsboxd refuses "clients", and root's refuses it while the group nsbox does not exist,
# each in one line naming the key.
test_readme_service_config_is_refused_saying_why() {
        python3 - "$README" > nsboxd.json <<'PY' || fail "no JSON block with \"clients\" in $README"
import sys
text = open(sys.argv[1]).read()
block = next(b.split("\n", 1)[1] for b in text.split("```json")[1:] if '"clients"' in b.split("```")[0])
print(block.split("```")[0], end="")
PY
        chmod 644 nsboxd.json
        if [ "$TEST_AS" = user ]; then
                assert_status 2 "$NSBOX_BUILD/nsboxd" --check-config --config "$PWD/nsboxd.json"
                assert_eq 1 "$(printf '%s\n' "$OUT" | wc -l)" "one line: $OUT"
                assert_contains "$OUT" "only a root nsboxd serves other users"
        elif getent group nsbox > /dev/null; then
                skip "the group nsbox exists here: root's nsboxd takes the example"
        else
                assert_status 2 "$NSBOX_BUILD/nsboxd" --check-config --config "$PWD/nsboxd.json"
                assert_eq 1 "$(printf '%s\n' "$OUT" | wc -l)" "one line: $OUT"
                assert_contains "$OUT" "key 'clients.groups': entry 0: expected a group id other than 0, or the name of a group of this host"
        fi
}

N=$(printf '%s' "$BLOCKS" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
[ "$N" -ge 3 ] || { echo "README.md: only $N blocks marked <!-- test: readme -->" >&2; exit 1; }
for ((b = 0; b < N; b++)); do
        line=$(printf '%s' "$BLOCKS" | python3 -c 'import json, sys; print(json.load(sys.stdin)['"$b"']["line"])')
        eval "test_readme_line_${line}() { run_block $b; }"
done

run_tests
