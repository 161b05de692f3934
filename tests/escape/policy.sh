#!/usr/bin/env bash
# Escape tier, policies (issue 19, findings 2 and 13).  A client of nsboxd names a policy: only a
# name of the policy directories or an absolute path, never a file relative to wherever nsboxd
# runs, which may be a directory the client can write; policy files are read strictly, so a FIFO,
# a directory, a device or a huge file is refused at once and the daemon keeps serving.  A short
# policy inherits the default's seccomp filter; weakening it takes an explicit "inherit": false
# or null.  As root the client is a tenant (another uid) of a root nsboxd; as a user, the user.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/escape.bash"

NSBOXD=${NSBOXD:-$(dirname "$NSBOX")/nsboxd}
TENANT=${NSBOX_TEST_USER:-nsboxtest}

# A JSON-RPC client: Conn(path) connects, call() sends a request and waits for its reply
# (skipping notifications); err_of(reply) is (code, message) of an error reply, or None.
PYLIB='import json, os, socket, sys
class Conn:
    def __init__(self, path, timeout=60):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.f = self.s.makefile("rb")
        self.n = 0
    def send(self, method, params=None):
        self.n += 1
        m = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            m["params"] = params
        self.s.sendall(json.dumps(m).encode() + b"\n")
        return self.n
    def reply(self, i):
        while True:
            line = self.f.readline()
            if not line:
                raise EOFError("nsboxd closed the connection")
            d = json.loads(line)
            if d.get("id") == i:
                return d
    def call(self, method, params=None):
        return self.reply(self.send(method, params))
def err_of(d):
    e = d.get("error")
    return None if e is None else (((e.get("data") or {}).get("code")), e.get("message", ""))
def check(cond, msg):
    if not cond:
        sys.exit(msg)
'

# Run a command as the client: the tenant uid as root (with a system PATH, from /), else as is.
as_client() {
        if [ "$TEST_AS" = root ]; then
                (cd / && PATH=/usr/local/bin:/usr/bin:/bin setpriv --reuid="$TENANT" --regid="$TENANT" --init-groups "$@")
        else
                "$@"
        fi
}

# start_nsboxd CWD [VAR=VALUE...]: an nsboxd of this test started in directory CWD (with the
# environment additions given), serving the tenant as root; its socket, config and log in a
# directory of its own.  Sets DSOCK, DDIR and DPID; stopped when the test ends.
start_nsboxd() {
        local cwd=$1 uid
        shift
        DDIR=$(mktemp -d /tmp/nsbox-pol.XXXXXX) || fail "mktemp"
        chmod 0711 "$DDIR"
        at_exit "rm -rf '$DDIR'"
        if [ "$TEST_AS" = root ]; then
                uid=$(id -u "$TENANT") || skip "no user $TENANT"
                printf '{"clients": {"uids": [%s]}}\n' "$uid" > "$DDIR/config.json"
        else
                printf '{}\n' > "$DDIR/config.json"
        fi
        DSOCK=$DDIR/d.sock
        (cd "$cwd" && exec env NSBOX_STORE="$DDIR/store" "$@" "$NSBOXD" --config "$DDIR/config.json" --socket "$DSOCK" \
                >> "$DDIR/log" 2>&1 < /dev/null) &
        DPID=$!
        at_exit "kill -TERM $DPID 2>/dev/null; wait_pids_gone 10 $DPID >/dev/null || kill -KILL $DPID 2>/dev/null"
        for _ in $(seq 300); do
                [ "$(NSBOX_SOCKET=$DSOCK daemon_pid)" = "$DPID" ] && return 0
                pid_alive "$DPID" || fail "nsboxd exited at start: $(tail -n 5 "$DDIR/log")"
                sleep 0.1
        done
        fail "nsboxd did not answer ping within 30 s: $(tail -n 5 "$DDIR/log")"
}

# ---- finding 2: a client's policy is a name or an absolute path --------------------------------

test_client_policy_name_cannot_load_a_file_from_nsboxd_cwd() {
        local w secret before after uid
        # nsboxd runs from a directory the client can write (mode 1777, like /tmp); next to it, a
        # secret the client cannot read (root's as root)
        w=$(mktemp -d /tmp/nsbox-polcwd.XXXXXX) || fail "mktemp"
        at_exit "rm -rf '$w'"
        chmod 1777 "$w"
        secret=$(mktemp /tmp/nsbox-polsecret.XXXXXX) || fail "mktemp"
        at_exit "rm -f '$secret'"
        echo "TOPSECRET-$$" > "$secret"
        chmod 0600 "$secret"
        # the client plants a policy binding the secret, and a FIFO nobody writes to
        # shellcheck disable=SC2016 # expanded by that shell
        as_client sh -c 'printf "{\"mounts\": [{\"source\": \"%s\", \"target\": \"/loot\"}], \"seccomp\": {\"rules\": []}}\n" "$2" > "$1/rt-evil.json" &&
                mkfifo "$1/x.json" && mkdir "$1/sub" && cp "$1/rt-evil.json" "$1/sub/p.json"' sh "$w" "$secret" ||
                fail "the client could not write into $w"
        before=$(ls -A "$w")
        start_nsboxd "$w"
        # every request within 60 s (a FIFO opened for reading would hang nsboxd forever)
        OUT=$(as_client python3 -c "$PYLIB"'
sock = sys.argv[1]
c = Conn(sock)
for pol in ("rt-evil.json", "x.json", "./rt-evil.json", "../x", "sub/p.json", "..", "rt-evil.json\n", ""):
    d = c.call("create", {"policy": pol})
    e = err_of(d)
    check(e is not None, "create with policy %r made a sandbox: %s" % (pol, json.dumps(d)))
    check(e[0] == "invalid_argument", "policy %r: code %s: %s" % (pol, e[0], e[1]))
    check("\n" not in e[1] and "neither a policy name" in e[1], "policy %r: not a one-line refusal of the name: %r" % (pol, e[1]))
# a name is looked up in the policy directories only: there is no rt-evil there
e = err_of(c.call("create", {"policy": "rt-evil"}))
check(e is not None and "not found" in e[1] and "\n" not in e[1], "policy rt-evil: %r" % (e,))
lst = c.call("list")["result"]["sandboxes"]
check(lst == [], "sandboxes after refused creates: %s" % json.dumps(lst))
# the daemon still serves: a default sandbox, promptly
d = c.call("create", {})
check("result" in d, "create with the default policy: %s" % json.dumps(d))
sid = d["result"]["id"]
r = c.call("call", {"sandbox": sid, "tool": "exec", "params": {"shell": "echo served"}})
check("served" in json.dumps(r), "exec in the default sandbox: %s" % json.dumps(r))
check("result" in c.call("destroy", {"sandbox": sid}), "destroy")
print("ok")' "$DSOCK" 2>&1) || fail "client of nsboxd: $OUT"
        after=$(ls -A "$w")
        assert_eq "$before" "$after" "the client's directory after the refused creates"
        if [ "$TEST_AS" = root ]; then
                # the command line sends a policy file as an absolute path: refused to a tenant
                # shellcheck disable=SC2016 # expanded by that shell
                OUT=$(as_client sh -c 'cd "$1" && NSBOX_SOCKET="$2" "$3" create --policy rt-evil.json' sh "$w" "$DSOCK" "$NSBOX" 2>&1) &&
                        fail "a tenant's nsbox create --policy rt-evil.json succeeded: $OUT"
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "'policy' names host paths or state of root"
        fi
        assert_eq "[]" "$(NSBOX_SOCKET=$DSOCK "$NSBOX" ls --json 2>&1)" "sandboxes of nsboxd at the end"
        assert_eq "$DPID" "$(NSBOX_SOCKET=$DSOCK daemon_pid)" "nsboxd still answering"
        grep -q TOPSECRET "$DDIR/log" && fail "the secret reached nsboxd's log"
        return 0
}

# ---- finding 2: policy files are read strictly -----------------------------------------------

test_policy_fifo_does_not_hang_nsboxd() {
        local base
        # the policy directory holds a FIFO, a directory, a device and a huge file as policies,
        # and a good one; NSBOX_POLICY_PATH is relative to where nsboxd starts
        base=$(mktemp -d /tmp/nsbox-polpath.XXXXXX) || fail "mktemp"
        at_exit "rm -rf '$base'"
        chmod 0755 "$base"
        mkdir -m 0755 "$base/pol"
        mkfifo -m 0644 "$base/pol/fifo.json"
        mkdir "$base/pol/dir.json"
        ln -s /dev/zero "$base/pol/zero.json"
        head -c $((2 << 20)) /dev/zero | tr '\0' ' ' > "$base/pol/big.json"
        printf '{"hostname": "from-pol"}\n' > "$base/pol/good.json"
        chmod 0644 "$base/pol/"*.json 2>/dev/null
        start_nsboxd "$base" NSBOX_POLICY_PATH=pol
        OUT=$(as_client python3 -c "$PYLIB"'
sock, base, test_as = sys.argv[1:4]
a, b = Conn(sock), Conn(sock)
# A asks for the FIFO; B, at the same time, for a good policy: both answered
ia = a.send("create", {"policy": "fifo"})
ib = b.send("create", {"policy": "good"})
e = err_of(a.reply(ia))
check(e is not None and e[0] == "invalid_argument" and "a FIFO, not a regular file" in e[1] and "\n" not in e[1],
      "policy fifo: %r" % (e,))
d = b.reply(ib)
check("result" in d, "create with policy good next to the FIFO: %s" % json.dumps(d))
sid = d["result"]["id"]
r = b.call("call", {"sandbox": sid, "tool": "exec", "params": {"shell": "hostname"}})
check("from-pol" in json.dumps(r), "hostname in the sandbox of policy good: %s" % json.dumps(r))
check("result" in b.call("destroy", {"sandbox": sid}), "destroy")
for name, needle in (("dir", "a directory, not a regular file"), ("zero", "a character device, not a regular file"),
                     ("big", "larger than 1048576 bytes")):
    e = err_of(a.call("create", {"policy": name}))
    check(e is not None and e[0] == "invalid_argument" and needle in e[1] and "\n" not in e[1], "policy %s: %r" % (name, e))
# a client that may name files (a user of their own nsboxd, not a tenant) gives the FIFO by its
# path: the same
if test_as == "user":
    e = err_of(a.call("create", {"policy": base + "/pol/fifo.json"}))
    check(e is not None and "a FIFO, not a regular file" in e[1], "policy %s/pol/fifo.json: %r" % (base, e))
check(a.call("list")["result"]["sandboxes"] == [], "sandboxes left")
print("ok")' "$DSOCK" "$base" "$TEST_AS" 2>&1) || fail "client of nsboxd: $OUT"
        # the same for nsboxd's own configuration: a FIFO is refused at once, one line
        assert_status 2 timeout 60 "$NSBOXD" --check-config --config "$base/pol/fifo.json"
        assert_eq "nsboxd: $base/pol/fifo.json: a FIFO, not a regular file" "$OUT" "nsboxd --config FIFO"
        assert_eq "$DPID" "$(NSBOX_SOCKET=$DSOCK daemon_pid)" "nsboxd still answering"
}

# ---- finding 13: a policy inherits what it does not set from the default -----------------------

# CMD's output in a sandbox of KIND with policy file $1 (as `nsbox run` and `nsbox create`
# send it: an absolute path, which root and a user may give their own nsboxd).
USERNS_CHECK='unshare -U true 2>&1 && echo UNSHARED; grep "^Seccomp:" /proc/self/status'

# shellcheck disable=SC2031 # KIND_NAME is set by for_each_kind for the check it runs
check_short_policy() { # kind policy-file
        local out
        out=$(in_kind "$1" --policy "$2" -- sh -c "$USERNS_CHECK")
        echo "    $KIND_NAME, policy $(cat "$2"): $out" >&2
        assert_not_contains "$out" "UNSHARED" "unshare -U in the $KIND_NAME"
        assert_contains "$out" "Operation not permitted" "unshare -U in the $KIND_NAME"
        assert_contains "$out" "$(printf 'Seccomp:\t2')" "/proc/self/status in the $KIND_NAME"
}

test_short_policy_keeps_the_default_seccomp_filter() {
        chmod 0755 "$TEST_TMP"
        printf '{"limits": {"timeout": 300}}\n' > "$TEST_TMP/short.json"
        printf '{"description": "stricter: a smaller disk", "limits": {"disk": "64M"}, "seccomp": {"foreign_arch": "errno"}}\n' \
                > "$TEST_TMP/stricter.json"
        chmod 0644 "$TEST_TMP/short.json" "$TEST_TMP/stricter.json"
        for_each_kind check_short_policy "$TEST_TMP/short.json"
        for_each_kind check_short_policy "$TEST_TMP/stricter.json"
        # and the limits of the short policy are its own
        assert_status 124 "$NSBOX" run --policy "$TEST_TMP/short.json" --timeout 0.5 -- sleep 30
}

# shellcheck disable=SC2031
check_weakened_policy() { # kind policy-file
        local out
        out=$(in_kind "$1" --policy "$2" -- sh -c "$USERNS_CHECK")
        echo "    $KIND_NAME, policy $(cat "$2"): $out" >&2
        assert_contains "$out" "UNSHARED" "unshare -U in the $KIND_NAME of an explicitly weakened policy"
}

test_explicit_weakening_drops_the_default_filter() {
        # the control of the test above: the same unshare works once a policy says so
        chmod 0755 "$TEST_TMP"
        printf '{"inherit": false, "limits": {"timeout": 300}}\n' > "$TEST_TMP/alone.json"
        printf '{"limits": {"timeout": 300}, "seccomp": {"rules": null}}\n' > "$TEST_TMP/norules.json"
        chmod 0644 "$TEST_TMP/alone.json" "$TEST_TMP/norules.json"
        for_each_kind check_weakened_policy "$TEST_TMP/alone.json"
        for_each_kind check_weakened_policy "$TEST_TMP/norules.json"
}

run_tests
