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

run_tests
