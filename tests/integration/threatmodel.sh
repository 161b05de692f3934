#!/usr/bin/env bash
# docs/threat-model.md's table of promise → test names matches the tests that exist: every name
# it gives is a test of the file it names, and every escape test is in it.
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/../lib.sh"
: "${NSBOX_SRC:?NSBOX_SRC must point at the source tree}"

# Print one line per problem with the table of FILE (a threat-model page), nothing when it
# matches the tests under $NSBOX_SRC/tests.
check_table() { # threat-model-file
        python3 - "$1" "$NSBOX_SRC/tests" <<'PY'
import os, re, sys
doc, tests = sys.argv[1], sys.argv[2]
rows = [l for l in open(doc) if re.match(r"\|\s*\d+\s*\|", l)]
if not rows:
    print("no table rows in %s" % doc)
named = set()
for row in rows:
    cells = row.split("|")
    names = re.findall(r"`([^`]+)`", cells[3] if len(cells) > 3 else "")
    if not names:
        print("a row names no test: %s" % row.strip())
    for n in names:
        m = re.fullmatch(r"(escape|integration|vm)/([a-z0-9_]+\.sh):([a-z0-9_]+)", n)
        if not m:
            print("'%s' is not tier/file.sh:test" % n)
            continue
        tier, f, t = m.groups()
        named.add(n)
        path = os.path.join(tests, tier, f)
        if not os.path.exists(path):
            print("'%s': no file %s" % (n, path))
            continue
        src = open(path).read()
        if tier == "vm":
            # guest.sh's TESTS lines are NAME:MODE:FUNCTION, FUNCTION defined as t_FUNCTION
            fns = re.findall(r"^%s:(?:root|user):([a-z0-9_]+)$" % re.escape(t), src, re.M)
            if not fns or not all(re.search(r"^t_%s\(\)" % f_, src, re.M) for f_ in fns):
                print("'%s': no such test in %s" % (n, path))
        elif not re.search(r"^test_%s\(\)" % re.escape(t), src, re.M):
            print("'%s': no function test_%s in %s" % (n, t, path))
escape = os.path.join(tests, "escape")
for f in sorted(os.listdir(escape)):
    if f.endswith(".sh"):
        for t in re.findall(r"^test_([a-z0-9_]+)\(\)", open(os.path.join(escape, f)).read(), re.M):
            if "escape/%s:%s" % (f, t) not in named:
                print("escape/%s:%s is not in the table" % (f, t))
print("%d names checked" % len(named), file=sys.stderr)
PY
}

test_threat_model_table_names_only_tests_that_exist() {
        local doc=$NSBOX_SRC/docs/threat-model.md out
        [ -f "$doc" ] || fail "no $doc"
        out=$(check_table "$doc" 2>"$TEST_TMP/count")
        echo "    $(cat "$TEST_TMP/count") in $doc" >&2
        assert_eq "" "$out" "problems with the table of $doc"
        # control: a name that does not exist, a test left out, a malformed name are each found
        # shellcheck disable=SC2016 # the backquotes are the table's
        sed -e 's/`escape\/cross.sh:two_run_sandboxes_cannot_reach_each_other`, //' \
                -e 's/`vm\/guest.sh:pids_forkbomb`/`vm\/guest.sh:pids_forkbomb_absent`/' \
                -e 's/`escape\/syscalls.sh:bpf_is_refused`/`escape\/syscalls.sh:bpf_is_gone`, `syscalls:bpf`/' "$doc" >"$TEST_TMP/bad.md"
        out=$(check_table "$TEST_TMP/bad.md" 2>/dev/null)
        echo "    control (a broken copy of the table): $(printf '%s' "$out" | tr '\n' ';')" >&2
        assert_contains "$out" "escape/cross.sh:two_run_sandboxes_cannot_reach_each_other is not in the table" "control"
        assert_contains "$out" "'vm/guest.sh:pids_forkbomb_absent': no such test" "control"
        assert_contains "$out" "'escape/syscalls.sh:bpf_is_gone': no function test_bpf_is_gone" "control"
        assert_contains "$out" "'syscalls:bpf' is not tier/file.sh:test" "control"
}


# Print one line per citation of the security page that leads nowhere in the tree at $1: a file
# citing a SECURITY.md the repository does not have, a setup order that is not steps 1 to 10, or a
# step number in the launcher's comments that the page does not have.  Nothing when all is well.
check_security_citations() { # source-tree
        python3 - "$1" <<'PY'
import os, re, sys
root = sys.argv[1]
page = os.path.join(root, "docs", "security.md")
steps = []
if not os.path.exists(page):
    print("no docs/security.md")
else:
    text = open(page).read()
    order = text.split("## Setup order", 1)[1].split("\n## ", 1)[0] if "## Setup order" in text else ""
    steps = [int(n) for n in re.findall(r"^(\d+)\. \*\*", order, re.M)]
    if steps != list(range(1, 11)):
        print("docs/security.md's setup order has steps %s, not 1 to 10" % steps)
me = os.path.abspath(__file__) if "__file__" in globals() else ""
for top in ("runtime", "tools", "rootfs", "policy", "tests", "docs", "man", "clients", "contrib", "examples", "README.md", "Makefile"):
    start = os.path.join(root, top)
    paths = [start] if os.path.isfile(start) else [os.path.join(d, f) for d, _, fs in os.walk(start) for f in fs]
    for path in sorted(paths):
        if path.endswith("tests/integration/threatmodel.sh"):
            continue  # this check names what it looks for
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r"(?<![a-z/])SECURITY\.md", line):
                print("%s:%d cites SECURITY.md, which the repository does not have" % (os.path.relpath(path, root), n))
for src in ("runtime/sandbox.c", "runtime/mounts.c"):
    path = os.path.join(root, src)
    if not os.path.exists(path):
        continue
    for n, line in enumerate(open(path).read().splitlines(), 1):
        for a, b in re.findall(r"/\* (\d+)(?:-(\d+))?[.,]", line):
            for k in sorted({int(a), int(b or a)}):
                if k not in steps:
                    print("%s:%d cites step %d, which docs/security.md does not have" % (src, n, k))
PY
}

test_code_and_docs_cite_the_security_page_of_the_repository() {
        local out
        out=$(check_security_citations "$NSBOX_SRC")
        assert_eq "" "$out" "citations of the security page"
        # control: a tree citing the shared SECURITY.md, with a step the page lacks, is caught
        mkdir -p "$TEST_TMP/tree/docs" "$TEST_TMP/tree/runtime"
        sed '/^10\. /,/^$/d' "$NSBOX_SRC/docs/security.md" >"$TEST_TMP/tree/docs/security.md"
        printf '/* see SECURITY.md */\n' >"$TEST_TMP/tree/runtime/x.c"
        printf '        /* 10. Teardown */\n' >"$TEST_TMP/tree/runtime/sandbox.c"
        out=$(check_security_citations "$TEST_TMP/tree")
        echo "    control (a broken tree): $(printf '%s' "$out" | tr '\n' ';')" >&2
        assert_contains "$out" "not 1 to 10" "control"
        assert_contains "$out" "runtime/x.c:1 cites SECURITY.md" "control"
        assert_contains "$out" "runtime/sandbox.c:1 cites step 10" "control"
}

run_tests
