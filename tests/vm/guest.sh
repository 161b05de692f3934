#!/bin/sh
# The VM tier's tests (busybox sh), run inside the guest as /guest.sh by /init (tests/vm/init).
#
# Protocol on the console, read by tests/vm/run:
#   VMTEST plan NAME [root|user]      every test, before any runs
#   VMTEST start NAME [MODE]          when it starts
#   VMTEST | detail                   any number, before a FAIL line
#   VMTEST PASS NAME [MODE]
#   VMTEST FAIL NAME [MODE]: reason   one line
# A test is a function t_FUNC; the runner runs it in its own process under busybox timeout, as
# root, or (MODE user) through setpriv as uid 4242 after setting up a delegated cgroup subtree
# /sys/fs/cgroup/user4242 for it.  A test fails when it calls fail (or finish after check),
# when it times out, and when it leaves processes behind (the runner kills them).
#
# Entry points: no argument: the runner; --test NAME MODE FUNC: one test (as root; drops to the
# user itself); --body FUNC: the test function alone, in the current identity; --lib: nothing
# (sourced for its functions).
#
# Environment of a test: VMTEST_AS (root|user), VMTEST_NAME, VMTEST_CGPARENT (where nsbox is
# expected to create sandbox cgroups: /sys/fs/cgroup/nsbox for root, /sys/fs/cgroup/user4242/nsbox
# for the user), the test's own directory as the working directory.

CG=/sys/fs/cgroup
TEST_UID=4242
PER_TEST_TIMEOUT=${VMTEST_TIMEOUT:-120}
BUDGET=${VMTEST_BUDGET:-780} # seconds of guest uptime after which no test starts

# name:mode:function; root tests first, so that they start from a root cgroup with no controller
# enabled below it (the user tests enable some for their delegated subtree)
TESTS="
smoke_run_root:root:smoke_run
cgroup2_controllers:root:cgroup2_controllers
memory_oom:root:memory_oom
pids_forkbomb:root:pids_forkbomb
cpus_half:root:cpus_half
disk_enospc:root:disk_enospc
pause_resume:root:pause_resume
no_cgroup_leaks:root:no_cgroup_leaks
nsboxd_leaf:root:nsboxd_leaf
limits_written:root:limits_written
daemon_oom:root:daemon_oom
exec_pids_limited:root:exec_pids_limited
run_pids_forkbomb:root:run_pids_forkbomb
daemon_disk_enospc:root:daemon_disk_enospc
rm_while_paused:root:rm_while_paused
smoke_run_user:user:smoke_run
memory_oom:user:memory_oom
pids_forkbomb:user:pids_forkbomb
cpus_half:user:cpus_half
disk_enospc:user:disk_enospc
pause_resume:user:pause_resume
no_cgroup_leaks:user:no_cgroup_leaks
limits_written:user:limits_written
daemon_oom:user:daemon_oom
run_pids_forkbomb:user:run_pids_forkbomb
daemon_disk_enospc:user:daemon_disk_enospc
exec_pids_limited:user:exec_pids_limited
rm_while_paused:user:rm_while_paused
"
# The cgroup v1 boot (vmtest.cgroup=v1, tests/vm/run): no cgroup2 at all.  Root's limits hold
# through nsbox's own cgroups under the v1 hierarchies; a user's explicit limits are refused.
TESTS_V1="
smoke_run_root:root:smoke_run
v1_limits_hold:root:v1_limits_hold
v1_daemon_limits:root:v1_daemon_limits
v1_pause_resume:root:v1_pause_resume
v1_user_limits_refused:user:v1_user_limits_refused
"
V1=
if grep -qw vmtest.cgroup=v1 /proc/cmdline; then
        V1=1
        TESTS=$TESTS_V1
fi

# ---- helpers for test bodies ---------------------------------------------------------------

ERRS=
fail() { echo "REASON: $*"; exit 1; }
note() { echo "$*"; }
check() { ERRS="${ERRS:+$ERRS; }$*"; } # record a mismatch and go on
finish() { [ -z "$ERRS" ] || fail "$ERRS"; exit 0; }
expect() { # what expected actual
        [ "$2" = "$3" ] || check "$1 is '$3', expected '$2'"
}
oneline() { # stdin → one line, at most N (300) characters
        tr '\n' '|' | sed 's/|*$//' | cut -c1-"${1:-300}"
}
uptime_cs() { # centiseconds since boot
        local u
        read -r u _ < /proc/uptime
        echo $(( ${u%.*} * 100 + 1${u#*.} - 100 ))
}
secs() { # centiseconds → seconds with two decimals
        printf '%d.%02d' $(($1 / 100)) $(($1 % 100))
}
is_num() { case $1 in ''|*[!0-9]*) return 1 ;; esac; return 0; }

# A field of a compact JSON object: strings without their quotes, other values as they are.
jget() { # json key
        printf '%s\n' "$1" | sed -nE 's/.*"'"$2"'" *: *("([^"\\]|\\.)*"|[^,}]*).*/\1/p' | head -n 1 |
                sed -E 's/^"(.*)"$/\1/; s/ +$//'
}
# A JSON array on stdin → each element (object) on one line, blanks outside strings removed.
split_objects() {
        tr '\n' ' ' | awk '{ s = s $0 } END {
                d = 0; q = 0; e = 0; cur = ""; n = length(s)
                for (i = 1; i <= n; i++) {
                        c = substr(s, i, 1)
                        if (q) { if (d >= 2) cur = cur c; if (e) e = 0; else if (c == "\\") e = 1; else if (c == "\"") q = 0; continue }
                        if (c == "\"") { q = 1; if (d >= 2) cur = cur c; continue }
                        if (c == " " || c == "\t") continue
                        if (c == "{" || c == "[") { d++; if (d >= 2) cur = cur c; continue }
                        if (c == "}" || c == "]") { if (d >= 2) cur = cur c; d--; if (d == 1 && cur != "") { print cur; cur = "" } continue }
                        if (d >= 2) cur = cur c
                }
        }'
}
# The object of sandbox ID in `nsbox ls --json`.
sandbox_obj() { # id
        nsbox ls --json 2>&1 | split_objects | grep "\"id\":\"$1\"" | head -n 1
}

# Run nsbox (or anything) with stdout in $T/out and stderr in $T/err; sets ST and JSON (the
# last line of stderr when it is a JSON object, else empty) and notes what happened.
T=$PWD
run_json() {
        "$@" > "$T/out" 2> "$T/err"
        ST=$?
        JSON=$(tail -n 1 "$T/err")
        case $JSON in "{"*"}") ;; *) JSON= ;; esac
        note "\$ $*"
        note "  exit status $ST; stdout: $(tail -c 300 "$T/out" | oneline)"
        note "  stderr: $(tail -n 4 "$T/err" | oneline 600)"
}
# nsbox's own failure (125: bad option, setup error) ends a test at once, with its message.
no_nsbox_error() { # what
        [ "$ST" != 125 ] || fail "$1: exit status 125 (nsbox failed): $(tail -n 2 "$T/err" | oneline)"
}
require_json() { # what
        [ -n "$JSON" ] || fail "$1: exit status $ST and no JSON object on the last line of stderr: $(tail -n 2 "$T/err" | oneline)"
}
json_fields() {
        local k m=
        for k in exit_code signal status reason oom_killed pids_limited wall_time_ms cpu_time_ms peak_memory_bytes cgroup; do
                printf '%s' "$JSON" | grep -q "\"$k\" *:" || m="$m $k"
        done
        [ -z "$m" ] || check "the JSON result lacks:$m"
}

# Processes: pids, their cgroup, identification of nsboxd daemons.
ppid_of() {
        local st
        { read -r st < "/proc/$1/stat"; } 2>/dev/null || return 1
        set -- ${st##*) }
        echo "$2"
}
comm_of() {
        local c
        { read -r c < "/proc/$1/comm"; } 2>/dev/null || return 1
        echo "$c"
}
cmdline_of() {
        { tr '\0' ' ' < "/proc/$1/cmdline"; } 2>/dev/null | sed 's/ $//'
}
cgroup_of() { # pid → absolute cgroup directory
        local c
        c=$(sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null)
        [ -n "$c" ] && echo "$CG${c%/}"
}
# Daemons: processes named nsboxd whose parent is not an nsboxd (the sandbox agents are).
daemon_pids() {
        local d p c pp
        for d in /proc/[0-9]*; do
                p=${d#/proc/}
                { read -r c < "$d/comm"; } 2>/dev/null || continue
                [ "$c" = nsboxd ] || continue
                pp=$(ppid_of "$p") || continue
                [ "$(comm_of "$pp")" = nsboxd ] && continue
                echo "$p"
        done
}
# Processes whose command line contains a string (not this shell and its children).
procs_matching() { # string
        local d p
        for d in /proc/[0-9]*; do
                p=${d#/proc/}
                [ "$p" = "$$" ] && continue
                case "$(cmdline_of "$p")" in *"$1"*) [ "$(ppid_of "$p")" = "$$" ] || echo "$p" ;; esac
        done
}
# Processes whose command line is exactly a string.
procs_cmdline_is() { # "prog arg..."
        local d p
        for d in /proc/[0-9]*; do
                p=${d#/proc/}
                [ "$(cmdline_of "$p")" = "$1" ] && echo "$p"
        done
}
# A process that exists and is not a zombie.
running() { # pid
        local st
        { read -r st < "/proc/$1/stat"; } 2>/dev/null || return 1
        set -- ${st##*) }
        [ "$1" != Z ]
}
# Wait up to N seconds for a command to succeed.
wait_for() { # seconds cmd...
        local n=$(($1 * 5))
        shift
        while [ "$n" -gt 0 ]; do
                "$@" && return 0
                sleep 0.2
                n=$((n - 1))
        done
        "$@"
}
no_procs_matching() { [ -z "$(procs_matching "$1")" ]; }
absent() { [ ! -e "$1" ]; }

# Cgroups left under PARENT by sandboxes: every directory below it, except those holding a
# process of a running nsboxd (the daemon may keep itself in a leaf there); "dir (procs: ...)".
cg_leftovers() { # parent
        [ -d "$1" ] || return 0
        local dp d f p skip
        dp=" $(daemon_pids | tr '\n' ' ') "
        for d in $(find "$1" -mindepth 1 -type d | sort -r); do
                skip=
                for f in $(find "$d" -name cgroup.procs); do
                        while read -r p; do
                                case $dp in *" $p "*) skip=1 ;; esac
                        done < "$f"
                done
                [ -n "$skip" ] || echo "$d (procs: $(cat "$d/cgroup.procs" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'))"
        done
}
# The cgroup a sandbox reports ("cgroup" of its JSON): must lie under the expected parent.
check_cgroup_under() { # what cgroup parent
        case $2 in
        "$3"/?*) return 0 ;;
        *) check "$1: cgroup is '${2:-absent}', expected a directory under $3/"; return 1 ;;
        esac
}

# ---- the tests -----------------------------------------------------------------------------
# Each runs in its own process, in its own directory, as root or as the user; $VMTEST_CGPARENT
# is where sandbox cgroups belong.

t_smoke_run() {
        out=$(nsbox run -- echo hi 2>&1)
        st=$?
        [ "$st" = 0 ] || fail "nsbox run -- echo hi: exit status $st: $(echo "$out" | oneline)"
        [ "$out" = hi ] || fail "nsbox run -- echo hi printed '$(echo "$out" | oneline)', expected 'hi'"
}

t_cgroup2_controllers() {
        fstype=$(awk '$2 == "/sys/fs/cgroup" { print $3 }' /proc/mounts)
        [ "$fstype" = cgroup2 ] || fail "/sys/fs/cgroup is '${fstype:-not mounted}', expected cgroup2"
        c=$(cat $CG/cgroup.controllers)
        miss=
        for x in memory pids cpu; do
                case " $c " in *" $x "*) ;; *) miss="$miss $x" ;; esac
        done
        [ -z "$miss" ] || fail "$CG/cgroup.controllers is '$c': lacks$miss"
}

# busybox dd allocates its 1 GiB buffer and touches it: the sandbox's cgroup OOM-kills it.
t_memory_oom() {
        P=$VMTEST_CGPARENT
        run_json nsbox run --memory 64M --json -- dd if=/dev/zero of=/dev/null bs=1G count=1
        no_nsbox_error "nsbox run --memory 64M --json -- dd bs=1G"
        require_json "nsbox run --memory 64M --json -- dd bs=1G"
        json_fields
        expect "exit status" 137 "$ST"
        expect reason oom_killed "$(jget "$JSON" reason)"
        expect oom_killed true "$(jget "$JSON" oom_killed)"
        cg=$(jget "$JSON" cgroup)
        check_cgroup_under "result" "$cg" "$P"
        out=$(nsbox run -- echo alive 2>&1)
        st=$?
        [ "$st" = 0 ] && [ "$out" = alive ] ||
                check "afterwards, nsbox run -- echo alive: exit status $st, output '$(echo "$out" | oneline)'"
        case $cg in /*) [ ! -d "$cg" ] || check "the sandbox's cgroup $cg still exists" ;; esac
        left=$(cg_leftovers "$P")
        [ -z "$left" ] || check "left under $P: $(echo "$left" | oneline)"
        finish
}

t_pids_forkbomb() {
        P=$VMTEST_CGPARENT
        id=$(nsbox create --pids 64 2> "$T/err")
        st=$?
        [ "$st" = 0 ] && [ -n "$id" ] ||
                fail "nsbox create --pids 64: exit status $st, id '$id': $(tail -n 2 "$T/err" | oneline)"
        note "sandbox $id"
        obj=$(sandbox_obj "$id")
        note "ls --json: $obj"
        cg=$(jget "$obj" cgroup)
        check_cgroup_under "nsbox ls --json" "$cg" "$P" || fail "$ERRS"
        [ -d "$cg" ] || fail "cgroup $cg of sandbox $id does not exist"
        max=$(cat "$cg/pids.max" 2>&1)
        [ "$max" = 64 ] || fail "$cg/pids.max is '$max', expected 64 (fork bomb not started)"
        out=$(nsbox call "$id" exec '{"shell":"b(){ b|b& }; b","background":true}' 2>&1)
        st=$?
        [ "$st" = 0 ] || fail "starting the fork bomb (nsbox call $id exec, background): exit status $st: $(echo "$out" | oneline)"
        note "fork bomb started: $(echo "$out" | oneline)"
        sleep 2
        note "pids.current $(cat "$cg/pids.current" 2>&1) 2 s after the start"
        # still usable: forks fail at the limit, so a few attempts may be needed
        t0=$(uptime_cs)
        n=0
        ok=
        while [ $n -lt 40 ]; do
                n=$((n + 1))
                r=$(timeout 30 nsbox exec "$id" -- echo responsive 2>&1)
                st=$?
                if [ "$st" = 0 ] && [ "$r" = responsive ]; then ok=1; break; fi
                note "attempt $n: exit status $st: $(echo "$r" | tail -n 2 | oneline)"
                [ $(($(uptime_cs) - t0)) -lt 6000 ] || break
                sleep 0.5
        done
        el=$(secs $(($(uptime_cs) - t0)))
        if [ -n "$ok" ]; then
                note "responsive after $n attempt(s), ${el}s"
        else
                check "nsbox exec $id -- echo responsive did not print 'responsive' in $n attempts over ${el}s"
        fi
        cur=$(cat "$cg/pids.current" 2>&1)
        events=$(cat "$cg/pids.events" 2>&1)
        hits=$(echo "$events" | awk '$1 == "max" { print $2 }')
        note "pids.current $cur; pids.events: $(echo "$events" | oneline)"
        if is_num "$cur"; then
                [ "$cur" -le 64 ] || check "$cg/pids.current is $cur, more than 64"
        else
                check "$cg/pids.current: '$cur'"
        fi
        is_num "$hits" && [ "$hits" -gt 0 ] || check "pids.events 'max' is '${hits:-absent}': the limit was never hit"
        out=$(timeout 60 nsbox rm "$id" 2>&1)
        st=$?
        [ "$st" = 0 ] || check "nsbox rm $id: exit status $st: $(echo "$out" | oneline)"
        wait_for 10 absent "$cg" ||
                check "cgroup $cg still exists 10 s after nsbox rm (procs: $(cat "$cg/cgroup.procs" 2>/dev/null | wc -l))"
        wait_for 10 no_procs_matching 'b|b&' ||
                check "fork bomb processes left 10 s after nsbox rm: $(procs_matching 'b|b&' | wc -l)"
        finish
}

t_cpus_half() {
        P=$VMTEST_CGPARENT
        run_json nsbox run --cpus 0.5 --json -- timeout 4 sh -c 'while :; do :; done'
        no_nsbox_error "nsbox run --cpus 0.5 --json -- timeout 4 sh -c 'while :; do :; done'"
        require_json "nsbox run --cpus 0.5 --json -- (a 4 s busy loop)"
        json_fields
        cpu=$(jget "$JSON" cpu_time_ms)
        wall=$(jget "$JSON" wall_time_ms)
        ratio=$(awk -v c="$cpu" -v w="$wall" 'BEGIN { if (w + 0 <= 0) print "none"; else printf "%.2f", c / w }')
        note "cpu_time_ms $cpu, wall_time_ms $wall, ratio $ratio"
        awk -v r="$ratio" 'BEGIN { exit !(r != "none" && r + 0 >= 0.3 && r + 0 <= 0.7) }' ||
                check "cpu_time_ms/wall_time_ms = $cpu/$wall = $ratio, expected between 0.3 and 0.7"
        awk -v w="$wall" 'BEGIN { exit !(w + 0 >= 3500) }' ||
                check "wall_time_ms $wall: the 4 s loop did not run its 4 s"
        cg=$(jget "$JSON" cgroup)
        check_cgroup_under "result" "$cg" "$P"
        case $cg in /*) [ ! -d "$cg" ] || check "the sandbox's cgroup $cg still exists" ;; esac
        finish
}

# /tmp and /workspace of a sandbox live on a tmpfs of --disk size, not on the VM's /tmp.
t_disk_enospc() {
        used() { df -k /tmp | awk 'NR == 2 { print $3 }'; }
        before=$(used)
        nsbox run --disk 32M -- sh -c '
                dd if=/dev/zero of=/tmp/big bs=1M count=100; echo "rc=$?"; echo tmp-full; sleep 2
                rm -f /tmp/big
                dd if=/dev/zero of=/workspace/big bs=1M count=100; echo "rc2=$?"; echo ws-full; sleep 2' > "$T/out" 2> "$T/err" &
        pid=$!
        grows=
        for stage in tmp-full ws-full; do
                seen_or_gone() { grep -q "$stage" "$T/out" || ! running "$pid"; }
                wait_for 90 seen_or_gone
                if grep -q "$stage" "$T/out"; then
                        now=$(used)
                        grows="$grows $stage:$((now - before))KiB"
                        [ $((now - before)) -le 4096 ] ||
                                check "the VM's /tmp grew by $((now - before)) KiB while the sandbox's disk was full ($stage)"
                fi
        done
        wait $pid
        st=$?
        out=$(cat "$T/out" "$T/err")
        note "exit status $st; stdout: $(oneline 300 < "$T/out")"
        note "stderr: $(oneline 500 < "$T/err")"
        note "VM /tmp growth:$grows"
        [ "$st" != 125 ] || fail "nsbox run --disk 32M: exit status 125: $(echo "$out" | tail -n 2 | oneline)"
        expect "exit status" 0 "$st"
        echo "$out" | grep -q "/tmp/big.*No space left on device" ||
                check "writing 100 MiB to /tmp in a --disk 32M sandbox did not report 'No space left on device' ($(echo "$out" | grep -E '^rc=|/tmp/big' | oneline))"
        echo "$out" | grep -q "/workspace/big.*No space left on device" ||
                check "writing 100 MiB to /workspace did not report 'No space left on device' ($(echo "$out" | grep -E '^rc2=|/workspace/big' | oneline))"
        echo "$out" | grep -q '^rc=0$' && check "dd to /tmp succeeded"
        echo "$out" | grep -q '^rc2=0$' && check "dd to /workspace succeeded"
        finish
}

t_pause_resume() {
        P=$VMTEST_CGPARENT
        id=$(nsbox create 2> "$T/err")
        st=$?
        [ "$st" = 0 ] && [ -n "$id" ] || fail "nsbox create: exit status $st, id '$id': $(tail -n 2 "$T/err" | oneline)"
        note "sandbox $id"
        cg=$(jget "$(sandbox_obj "$id")" cgroup)
        check_cgroup_under "nsbox ls --json" "$cg" "$P" || fail "$ERRS"
        out=$(nsbox call "$id" exec '{"shell":"i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.1; done","background":true}' 2>&1)
        st=$?
        [ "$st" = 0 ] || fail "starting the counter (nsbox call $id exec, background): exit status $st: $(echo "$out" | oneline)"
        sleep 1
        read_counter() { nsbox exec "$id" -- cat /tmp/c 2>&1; }
        a=$(read_counter)
        n=0
        while ! is_num "$a" && [ $n -lt 20 ]; do sleep 0.5; a=$(read_counter); n=$((n + 1)); done
        ta=$(uptime_cs)
        is_num "$a" || fail "reading the counter: '$(echo "$a" | oneline)'"
        out=$(nsbox pause "$id" 2>&1)
        st=$?
        tp=$(uptime_cs)
        [ "$st" = 0 ] || fail "nsbox pause $id: exit status $st: $(echo "$out" | oneline)"
        obj=$(sandbox_obj "$id")
        expect "state in nsbox ls --json" paused "$(jget "$obj" state)"
        frozen=$(grep '^frozen ' "$cg/cgroup.events" 2>&1)
        expect "$cg/cgroup.events" "frozen 1" "$frozen"
        nsbox exec "$id" -- true > "$T/x" 2>&1
        st=$?
        # nsbox exec: every refusal of nsboxd is 125 (1 could be the command's own status)
        [ "$st" = 125 ] || check "nsbox exec -- true while paused: exit status $st, expected 125 ($(oneline < "$T/x"))"
        lines=$(grep -c . "$T/x")
        [ "$lines" = 1 ] && grep -q paused "$T/x" ||
                check "nsbox exec while paused printed $lines line(s), expected one with 'paused': $(oneline < "$T/x")"
        nsbox call "$id" read_file '{"path":"/tmp/c"}' > "$T/x" 2>&1
        st=$?
        [ "$st" = 1 ] && grep -q "conflict: sandbox $id is paused" "$T/x" ||
                check "nsbox call while paused: exit status $st, expected 1 with 'conflict: ... is paused': $(oneline < "$T/x")"
        sleep 3
        tr_=$(uptime_cs)
        out=$(nsbox resume "$id" 2>&1)
        st=$?
        [ "$st" = 0 ] || fail "nsbox resume $id: exit status $st: $(echo "$out" | oneline); $ERRS"
        b=$(read_counter)
        tb=$(uptime_cs)
        is_num "$b" || fail "reading the counter after resume: '$(echo "$b" | oneline)'; $ERRS"
        # 10 steps of slack, plus 10 per second the counter legitimately ran (between reading a
        # and the pause, between the resume and reading b: slow under TCG); it would be ~30 more
        # had it run through the 3 s pause
        unpaused=$(( (tp - ta) + (tb - tr_) ))
        limit=$((10 + unpaused / 10))
        note "a=$a b=$b: +$((b - a)) (limit $limit) over $(secs $((tb - ta)))s, paused $(secs $((tr_ - tp)))s, not paused $(secs $unpaused)s"
        [ $((b - a)) -le $limit ] ||
                check "the counter went from $a to $b across a $(secs $((tr_ - tp)))s pause (at most $limit expected): it kept running"
        sleep 1
        c=$(read_counter)
        note "c=$c one second after resume"
        is_num "$c" && [ "$c" -gt "$b" ] || check "the counter did not run after resume: b=$b, 1 s later '$c'"
        out=$(nsbox rm "$id" 2>&1)
        st=$?
        [ "$st" = 0 ] || check "nsbox rm $id: exit status $st: $(echo "$out" | oneline)"
        wait_for 10 absent "$cg" || check "cgroup $cg still exists 10 s after nsbox rm"
        finish
}

t_no_cgroup_leaks() {
        P=$VMTEST_CGPARENT
        # (a) timeout
        nsbox run --timeout 1 -- sleep 10 > "$T/a" 2>&1
        st=$?
        expect "(a) exit status of nsbox run --timeout 1 -- sleep 10" 124 "$st"
        note "(a) nsbox run --timeout 1 -- sleep 10: status $st, output '$(oneline < "$T/a")'; cgroups left: $(cg_leftovers "$P" | oneline)"
        # (b) OOM
        nsbox run --memory 64M -- dd if=/dev/zero of=/dev/null bs=1G count=1 > "$T/b" 2>&1
        st=$?
        [ "$st" = 137 ] || check "(b) exit status of nsbox run --memory 64M -- dd bs=1G is '$st', expected '137' ($(tail -n 1 "$T/b" | oneline))"
        note "(b) nsbox run --memory 64M -- dd bs=1G: status $st, output '$(oneline < "$T/b")'; cgroups left: $(cg_leftovers "$P" | oneline)"
        # (c) create + rm
        id=$(nsbox create 2> "$T/c")
        st=$?
        if [ "$st" = 0 ] && [ -n "$id" ]; then
                out=$(nsbox rm "$id" 2>&1) || check "(c) nsbox rm $id: $(echo "$out" | oneline)"
        else
                check "(c) nsbox create: exit status $st: $(tail -n 1 "$T/c" | oneline)"
        fi
        note "(c) create + rm of '$id': cgroups left: $(cg_leftovers "$P" | oneline)"
        # (d) the supervisor killed with SIGKILL: its sandbox dies with it; the next run collects
        # the cgroup it could not remove
        nsbox run -- sleep 100 > "$T/d" 2>&1 &
        sup=$!
        sleeping() { [ -n "$(procs_cmdline_is 'sleep 100')" ]; }
        if wait_for 60 sleeping; then
                sleeper=$(procs_cmdline_is 'sleep 100' | tr '\n' ' ')
                note "(d) nsbox $sup, its sleep: $sleeper in $(cgroup_of "${sleeper%% *}")"
                kill -9 "$sup"
                wait_for 20 eval '! sleeping' ||
                        check "(d) sleep 100 still runs 20 s after kill -9 of its nsbox: $(procs_cmdline_is 'sleep 100' | tr '\n' ' ')"
        else
                check "(d) the sandbox's sleep 100 did not start within 60 s: $(oneline < "$T/d")"
                kill -9 "$sup" 2>/dev/null
        fi
        wait "$sup" 2>/dev/null
        note "(d) cgroups left before the next run: $(cg_leftovers "$P" | oneline)"
        out=$(nsbox run -- true 2>&1)
        st=$?
        [ "$st" = 0 ] || check "nsbox run -- true: exit status $st: $(echo "$out" | oneline)"
        left=$(cg_leftovers "$P")
        [ -z "$left" ] || ERRS="left under $P: $(echo "$left" | oneline 600)${ERRS:+; $ERRS}"
        finish
}

# ---- the cgroup v1 boot --------------------------------------------------------------------

# nsbox's sandbox cgroups under the v1 hierarchies: "dir" per line
v1_sandboxes() { find /sys/fs/cgroup/*/nsbox -mindepth 1 -maxdepth 1 -type d -name 'sb-*' 2>/dev/null; }

t_v1_limits_hold() {
        run_json nsbox run --memory 64M --json -- dd if=/dev/zero of=/dev/null bs=1G count=1
        no_nsbox_error "nsbox run --memory 64M -- dd bs=1G"
        require_json "nsbox run --memory 64M -- dd bs=1G"
        expect "exit status under --memory 64M" 137 "$ST"
        expect "reason under --memory 64M" oom_killed "$(jget "$JSON" reason)"
        expect "cgroup of the result (v1 has no cgroup2 path)" null "$(jget "$JSON" cgroup)"
        run_json nsbox run --pids 32 --json -- sh -c 'i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i + 1)); done 2> /dev/null; echo forked'
        no_nsbox_error "nsbox run --pids 32 -- (100 sleeps)"
        expect "pids_limited under --pids 32" true "$(jget "$JSON" pids_limited)"
        run_json nsbox run --cpus 0.5 --json -- timeout 4 sh -c 'while :; do :; done'
        no_nsbox_error "nsbox run --cpus 0.5 -- (a 4 s busy loop)"
        ratio=$(awk -v c="$(jget "$JSON" cpu_time_ms)" -v w="$(jget "$JSON" wall_time_ms)" 'BEGIN { if (w + 0 <= 0) print "none"; else printf "%.2f", c / w }')
        note "cpu/wall under --cpus 0.5: $ratio"
        awk -v r="$ratio" 'BEGIN { exit !(r != "none" && r + 0 >= 0.3 && r + 0 <= 0.7) }' ||
                check "cpu_time_ms/wall_time_ms under --cpus 0.5 is $ratio, expected between 0.3 and 0.7"
        left=$(v1_sandboxes)
        [ -z "$left" ] || check "v1 cgroups left: $(echo "$left" | oneline)"
        finish
}

t_v1_daemon_limits() {
        id=$(nsbox create --memory 64M --pids 50 2> "$T/err")
        st=$?
        [ "$st" = 0 ] && [ -n "$id" ] || fail "nsbox create --memory 64M --pids 50: exit status $st: $(tail -n 2 "$T/err" | oneline)"
        [ ! -s "$T/err" ] || check "create's stderr: $(oneline < "$T/err")"
        obj=$(sandbox_obj "$id")
        note "ls --json: $obj"
        case $obj in *'"limits_enforced":{"memory":67108864,"pids":50,'*) ;; *) check "limits_enforced in $obj" ;; esac
        case $obj in *'"cgroup":null'*) ;; *) check "cgroup (v1 only: null) in $obj" ;; esac
        lim=$(cat /sys/fs/cgroup/memory/nsbox/sb-*/memory.limit_in_bytes 2>&1 | oneline)
        expect "memory.limit_in_bytes of the sandbox's v1 cgroup" 67108864 "$lim"
        nsbox exec "$id" -- dd if=/dev/zero of=/dev/null bs=1G count=1 > "$T/x" 2>&1
        st=$?
        [ "$st" != 0 ] || check "a 1 GiB dd in a 64M sandbox succeeded"
        note "dd bs=1G: status $st: $(oneline < "$T/x")"
        out=$(nsbox rm -f "$id" 2>&1) || check "nsbox rm -f $id: $(echo "$out" | oneline)"
        wait_for 10 eval '[ -z "$(v1_sandboxes)" ]' || check "v1 cgroups left after rm: $(v1_sandboxes | oneline)"
        finish
}

# Pause through the v1 freezer: the sandbox's processes stop, and a paused sandbox can be removed
# (a frozen v1 task dies of SIGKILL only once thawed).
t_v1_pause_resume() {
        id=$(nsbox create 2> "$T/err") || fail "nsbox create: $(oneline < "$T/err")"
        # the count goes in by rename: a freeze between echo's truncation and its write would
        # leave an empty file for the read right after resume
        out=$(nsbox call "$id" exec '{"shell":"i=0; while :; do i=$((i+1)); echo $i > /tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.1; done","background":true}' 2>&1) ||
                fail "starting the counter: $(echo "$out" | oneline)"
        sleep 1
        out=$(nsbox pause "$id" 2>&1) || fail "nsbox pause: $(echo "$out" | oneline)"
        expect "state" paused "$(jget "$(sandbox_obj "$id")" state)"
        nsbox resume "$id" > "$T/r" 2>&1 || fail "nsbox resume: $(oneline < "$T/r")"
        a=$(nsbox exec "$id" -- cat /tmp/c 2>&1)
        out=$(nsbox pause "$id" 2>&1) || fail "nsbox pause (2): $(echo "$out" | oneline)"
        expect "freezer.state while paused" FROZEN "$(cat /sys/fs/cgroup/freezer/nsbox/sb-*/freezer.state 2>&1 | oneline)"
        sleep 3
        nsbox resume "$id" > "$T/r" 2>&1 || fail "nsbox resume (2): $(oneline < "$T/r")"
        b=$(nsbox exec "$id" -- cat /tmp/c 2>&1)
        note "a=$a b=$b across a 3 s pause"
        is_num "$a" && is_num "$b" || fail "counter: '$a' '$b'"
        [ $((b - a)) -le 15 ] || check "the counter went from $a to $b across a 3 s pause: it kept running"
        sleep 1
        c=$(nsbox exec "$id" -- cat /tmp/c 2>&1)
        is_num "$c" && [ "$c" -gt "$b" ] || check "the counter did not run after resume: b=$b, then '$c'"
        nsbox pause "$id" > /dev/null 2>&1 || check "nsbox pause (3)"
        out=$(timeout 30 nsbox rm -f "$id" 2>&1) || check "nsbox rm -f of the paused sandbox: $(echo "$out" | oneline)"
        wait_for 10 eval '[ -z "$(v1_sandboxes)" ]' || check "v1 cgroups left after rm of a paused sandbox: $(v1_sandboxes | oneline)"
        finish
}

# A user cannot use cgroup v1: an explicit limit is refused in one line, or runs with a warning.
t_v1_user_limits_refused() {
        nsbox run --memory 64M -- echo ran > "$T/out" 2> "$T/err"
        st=$?
        expect "exit status of nsbox run --memory 64M" 125 "$st"
        expect "stderr lines" 1 "$(grep -c . "$T/err")"
        grep -q -- "--limits best-effort" "$T/err" || check "the refusal names no way out: $(oneline < "$T/err")"
        nsbox run --limits best-effort --memory 64M -- echo ran > "$T/out" 2> "$T/err"
        st=$?
        expect "nsbox run --limits best-effort --memory 64M" "0 ran" "$st $(cat "$T/out")"
        grep -q "^nsbox: warning: .*running without them" "$T/err" || check "no warning: $(oneline < "$T/err")"
        finish
}

# nsboxd as systemd starts a service with Delegate=yes: alone in a fresh cgroup.
t_nsboxd_leaf() {
        svc=$CG/svc
        sock=/run/svc.sock
        rm -f "$sock" "$sock.lock" "$sock.log"
        mkdir "$svc" || fail "mkdir $svc failed"
        (echo 0 > "$svc/cgroup.procs" && exec nsboxd --socket "$sock") > "$T/nsboxd.log" 2>&1 &
        dpid=$!
        alive() { running "$dpid"; }
        sock_up() { [ -S "$sock" ] || ! alive; }
        wait_for 60 sock_up
        alive || fail "nsboxd --socket $sock exited: $(tail -n 3 "$T/nsboxd.log" | oneline)"
        [ -S "$sock" ] || { kill -9 "$dpid"; fail "nsboxd --socket $sock: no socket after 60 s"; }
        note "nsboxd $dpid in $(cgroup_of "$dpid") before create"
        id=$(NSBOX_SOCKET=$sock nsbox create 2> "$T/err")
        st=$?
        if [ "$st" != 0 ] || [ -z "$id" ]; then
                kill -9 "$dpid"
                fail "NSBOX_SOCKET=$sock nsbox create: exit status $st: $(tail -n 2 "$T/err" | oneline)"
        fi
        dcg=$(cgroup_of "$dpid")
        note "sandbox $id; nsboxd now in $dcg"
        grep -qx "$dpid" "$svc/cgroup.procs" && check "nsboxd ($dpid) is still in $svc/cgroup.procs"
        case $dcg in "$svc"/?*) ;; *) check "nsboxd's cgroup is '$dcg', expected a child of $svc" ;; esac
        sc=$(cat "$svc/cgroup.subtree_control")
        for x in memory pids; do
                case " $sc " in *" $x "*) ;; *) check "$svc/cgroup.subtree_control is '$sc': no $x" ;; esac
        done
        obj=$(NSBOX_SOCKET=$sock nsbox ls --json 2>&1 | split_objects | grep "\"id\":\"$id\"")
        scg=$(jget "$obj" cgroup)
        note "ls --json: $obj"
        check_cgroup_under "the sandbox (nsbox ls --json)" "$scg" "$svc"
        kill -TERM "$dpid"
        wait_for 20 eval '! alive'
        if alive; then
                check "nsboxd did not exit within 20 s of SIGTERM"
                kill -9 "$dpid"
        fi
        wait "$dpid" 2>/dev/null
        case $scg in "$svc"/?*) wait_for 5 absent "$scg" || check "the sandbox's cgroup $scg still exists after nsboxd exited on SIGTERM" ;; esac
        note "left under $svc after the daemon: $(find "$svc" -mindepth 1 -type d | tr '\n' ' ')"
        # leave no trace for a later run: the runner removes what is left
        finish
}


# The limits are in the sandbox's cgroup files while it runs, with the policy's enforce:
# required (every controller is here), and the sandbox sees itself at its cgroup namespace root.
t_limits_written() {
        P=$VMTEST_CGPARENT
        printf '{"limits": {"memory": "100M", "pids": 50, "cpus": 0.25, "enforce": "required"}}\n' > "$T/req.json"
        nsbox run --policy "$T/req.json" --json -- sh -c 'grep "^0::" /proc/self/cgroup; sleep 3' > "$T/out" 2> "$T/err" &
        rp=$!
        cg=
        n=0
        while [ -z "$cg" ] && [ $n -lt 50 ]; do
                cg=$(find "$P" -mindepth 1 -maxdepth 1 -type d -name 'sb-*' 2>/dev/null | head -n 1)
                [ -n "$cg" ] && [ -n "$(cat "$cg/cgroup.procs" 2>/dev/null)" ] || { cg=; sleep 0.1; }
                n=$((n + 1))
        done
        [ -n "$cg" ] || { wait "$rp"; fail "no populated sandbox cgroup appeared under $P: $(oneline < "$T/err")"; }
        expect "$cg/memory.max" 104857600 "$(cat "$cg/memory.max")"
        expect "$cg/memory.swap.max" 0 "$(cat "$cg/memory.swap.max" 2>/dev/null || echo 0)"
        expect "$cg/memory.oom.group" 1 "$(cat "$cg/memory.oom.group")"
        expect "$cg/pids.max" 50 "$(cat "$cg/pids.max")"
        expect "$cg/cpu.max" "25000 100000" "$(cat "$cg/cpu.max")"
        wait "$rp"
        st=$?
        expect "exit status of the run" 0 "$st"
        expect "/proc/self/cgroup inside" "0::/" "$(cat "$T/out")"
        JSON=$(tail -n 1 "$T/err")
        expect "cgroup in the result" "$cg" "$(jget "$JSON" cgroup)"
        wait_for 5 absent "$cg" || check "cgroup $cg still exists after the run"
        # without enforce: required and without controllers the same run would warn: here it must not
        grep -q warning "$T/err" && check "a warning although every controller is here: $(oneline < "$T/err")"
        finish
}

# A persistent sandbox at its memory limit: the exec running gets an oom_killed result, the
# sandbox is gone with its cgroup, another sandbox is untouched.
t_daemon_oom() {
        P=$VMTEST_CGPARENT
        other=$(nsbox create 2> "$T/err") || fail "nsbox create: $(oneline < "$T/err")"
        id=$(nsbox create --memory 64M 2> "$T/err") || fail "nsbox create --memory 64M: $(oneline < "$T/err")"
        cg=$(jget "$(sandbox_obj "$id")" cgroup)
        check_cgroup_under "nsbox ls --json" "$cg" "$P"
        nsbox call "$id" exec '{"cmd": ["dd", "if=/dev/zero", "of=/dev/null", "bs=1G", "count=1"]}' > "$T/out" 2> "$T/err"
        st=$?
        note "call exec dd: exit status $st: $(oneline < "$T/out") $(oneline < "$T/err")"
        expect "exit status of nsbox call" 0 "$st"
        r=$(tr -d ' \n' < "$T/out")
        expect "reason" oom_killed "$(jget "$r" reason)"
        expect "exit_code" 137 "$(jget "$r" exit_code)"
        expect "oom_killed" true "$(jget "$r" oom_killed)"
        obj=$(sandbox_obj "$id")
        [ -z "$obj" ] || check "the OOM-killed sandbox is still listed: $obj"
        wait_for 5 absent "$cg" || check "its cgroup $cg still exists"
        out=$(nsbox exec "$id" -- true 2>&1)
        st=$?
        [ "$st" = 125 ] && echo "$out" | grep -q not_found || check "exec in the OOM-killed sandbox: exit status $st: $(echo "$out" | oneline)"
        out=$(nsbox exec "$other" -- echo alive 2>&1)
        [ "$out" = alive ] || check "the other sandbox: '$(echo "$out" | oneline)'"
        nsbox rm "$other" || check "nsbox rm $other failed"
        finish
}

# An exec whose forks hit the pids limit says pids_limited; the sandbox answers afterwards.
t_exec_pids_limited() {
        id=$(nsbox create --pids 16 2> "$T/err") || fail "nsbox create --pids 16: $(oneline < "$T/err")"
        nsbox call "$id" exec '{"shell": "for i in $(seq 40); do sleep 2 & done; wait; exit 0"}' > "$T/out" 2> "$T/err"
        st=$?
        r=$(tr -d '\n' < "$T/out")
        note "exec: exit status $st: $(echo "$r" | cut -c1-300) $(oneline < "$T/err")"
        expect "reason" pids_limited "$(jget "$(echo "$r" | tr -d ' ')" reason)"
        out=$(nsbox exec "$id" -- echo fine 2>&1)
        expect "a later exec" fine "$out"
        out=$(nsbox call "$id" exec '{"cmd": ["true"]}' 2>&1 | tr -d ' \n')
        expect "reason of an exec after the limit was hit" exited "$(jget "$out" reason)"
        nsbox rm "$id" || check "nsbox rm failed"
        finish
}

# A fork bomb under nsbox run (pids_forkbomb is nsboxd's): pids.max holds it, the guest's
# process count stays bounded, the command's shell still finishes, the result says
# pids_limited, and no bomb process outlives the sandbox.
t_run_pids_forkbomb() {
        P=$VMTEST_CGPARENT
        before=$(all_procs | wc -l)
        nsbox run --pids 64 --json -- sh -c 'sleep 4 & s=$!; (b(){ b|b& }; b) 2>/dev/null & wait $s; echo survived' \
                > "$T/out" 2> "$T/err" &
        pid=$!
        sleep 2
        during=$(all_procs | wc -l)
        wait $pid
        ST=$?
        JSON=$(tail -n 1 "$T/err")
        case $JSON in "{"*"}") ;; *) JSON= ;; esac
        note "processes in the guest: $before before, $during during the bomb"
        note "exit status $ST; stdout: $(oneline < "$T/out"); stderr: $(tail -n 3 "$T/err" | oneline 600)"
        no_nsbox_error "nsbox run --pids 64 -- fork bomb"
        require_json "nsbox run --pids 64 --json -- fork bomb"
        expect "exit status" 0 "$ST"
        expect "stdout" survived "$(cat "$T/out")"
        expect pids_limited true "$(jget "$JSON" pids_limited)"
        [ "$during" -le $((before + 64 + 8)) ] ||
                check "$during processes in the guest during the bomb, $before before: more than the sandbox's 64 (+8 for nsbox)"
        wait_for 10 no_procs_matching 'b|b&' ||
                check "fork bomb processes left 10 s after nsbox run ended: $(procs_matching 'b|b&' | wc -l)"
        left=$(cg_leftovers "$P")
        [ -z "$left" ] || check "left under $P: $(echo "$left" | oneline)"
        finish
}

# Disk fill in an nsboxd sandbox (disk_enospc is nsbox run's): ENOSPC inside, the guest's /tmp
# grows by no more than the limit, the agent's write_file says too_large, the sandbox still
# answers, and its space is given back by nsbox rm.
t_daemon_disk_enospc() {
        used() { df -k /tmp | awk 'NR == 2 { print $3 }'; }
        before=$(used)
        id=$(nsbox create --disk 32M 2> "$T/err") || fail "nsbox create --disk 32M: $(oneline < "$T/err")"
        out=$(nsbox exec "$id" -- sh -c 'dd if=/dev/zero of=/workspace/big bs=1M count=100; echo "rc=$?"' 2>&1)
        grew=$(($(used) - before))
        note "exec dd 100 MiB: $(echo "$out" | oneline); the guest's /tmp grew by $grew KiB"
        echo "$out" | grep -q "No space left on device" ||
                check "writing 100 MiB to /workspace in a --disk 32M sandbox did not report 'No space left on device'"
        echo "$out" | grep -q '^rc=0$' && check "dd of 100 MiB to /workspace succeeded"
        [ "$grew" -le $((36 * 1024)) ] || check "the guest's /tmp grew by $grew KiB, more than the 32 MiB limit"
        r=$(nsbox call "$id" write_file "{\"path\": \"more.txt\", \"content\": \"$(head -c 65536 /dev/zero | tr '\0' x)\"}" 2>&1)
        note "write_file 64 KiB on the full disk: $(echo "$r" | oneline)"
        echo "$r" | grep -q too_large || check "write_file on a full disk did not say too_large: $(echo "$r" | oneline)"
        out=$(nsbox exec "$id" -- echo alive 2>&1)
        expect "an exec afterwards" alive "$out"
        nsbox rm "$id" || check "nsbox rm $id failed"
        wait_for 10 sh -c "[ \$(df -k /tmp | awk 'NR == 2 { print \$3 }') -le $((before + 4096)) ]" ||
                check "after nsbox rm the guest's /tmp is still $(($(used) - before)) KiB bigger than before"
        finish
}

# A paused sandbox is destroyed whole: processes, cgroup.
t_rm_while_paused() {
        id=$(nsbox create 2> "$T/err") || fail "nsbox create: $(oneline < "$T/err")"
        cg=$(jget "$(sandbox_obj "$id")" cgroup)
        nsbox call "$id" exec '{"shell": "sleep 4242", "background": true}' > /dev/null || check "background sleep failed"
        nsbox pause "$id" || fail "nsbox pause failed"
        grep -qx 'frozen 1' "$cg/cgroup.events" || check "not frozen: $(oneline < "$cg/cgroup.events")"
        nsbox rm "$id" || check "nsbox rm of a paused sandbox failed"
        wait_for 5 absent "$cg" || check "cgroup $cg left after rm"
        wait_for 5 no_procs_matching "sleep 4242" || check "its processes are left: $(procs_matching "sleep 4242" | oneline)"
        finish
}

# ---- the runner ----------------------------------------------------------------------------

as_user() { # command... as uid 4242, in the current cgroup
        /usr/bin/setpriv --reuid=$TEST_UID --regid=$TEST_UID --clear-groups \
                env HOME=/home/nsboxtest USER=nsboxtest LOGNAME=nsboxtest \
                VMTEST_AS=user VMTEST_NAME="$VMTEST_NAME" VMTEST_CGPARENT="$VMTEST_CGPARENT" "$@"
}

# A delegated subtree for uid 4242, as systemd gives a user session: user4242 (controllers
# available to it) with the session's processes in user4242/session.
setup_user_cgroup() {
        echo "+memory +pids +cpu" > $CG/cgroup.subtree_control ||
                fail "enabling memory, pids and cpu in $CG/cgroup.subtree_control failed"
        mkdir -p $CG/user4242/session || fail "mkdir $CG/user4242/session failed"
        for d in $CG/user4242 $CG/user4242/session; do
                chown $TEST_UID:$TEST_UID "$d" "$d/cgroup.procs" "$d/cgroup.threads" "$d/cgroup.subtree_control" ||
                        fail "chown of $d failed"
        done
}

# Every user-space process but kernel threads: "pid" per line.
all_procs() {
        local d p st
        for d in /proc/[0-9]*; do
                p=${d#/proc/}
                { read -r st < "$d/stat"; } 2>/dev/null || continue
                set -- ${st##*) }
                [ "$p" = 2 ] || [ "$2" = 2 ] && continue
                echo "$p"
        done
}
# Processes started since $BEFORE that are still there: not this runner or its command
# substitutions, not zombies, not busybox timeout's watchers (they exit within a second).
new_procs() {
        local d p st c
        for d in /proc/[0-9]*; do
                p=${d#/proc/}
                case $BEFORE in *" $p "*) continue ;; esac
                [ "$p" = "$$" ] && continue
                { read -r st < "$d/stat"; } 2>/dev/null || continue
                set -- ${st##*) }
                [ "$p" = 2 ] || [ "$2" = 2 ] || [ "$2" = "$$" ] || [ "$1" = Z ] && continue
                { read -r c < "$d/comm"; } 2>/dev/null || continue
                [ "$c" = timeout ] && [ "$2" = 1 ] && continue
                echo "$p"
        done
}
proc_desc() { # pid → description
        local uid
        uid=$(awk '/^Uid:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
        echo "pid $1 (uid $uid, ppid $(ppid_of "$1"), cgroup $(sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null)): $(cmdline_of "$1" | cut -c1-160)"
}

# After a test: stop the daemons it left running (noted, not a failure), kill every other
# process it left (a failure), remove sandbox cgroups left behind (noted).  Writes notes to
# $1 and leftover processes to $2.
cleanup_after() { # notes-file leftovers-file
        local p n left d
        : > "$1"
        : > "$2"
        for p in $(new_procs); do
                [ "$(comm_of "$p")" = nsboxd ] || continue
                [ "$(comm_of "$(ppid_of "$p")")" = nsboxd ] && continue
                echo "stopped nsboxd left running: $(proc_desc "$p")" >> "$1"
                kill -TERM "$p" 2>/dev/null
        done
        n=0
        while [ $n -lt 50 ] && [ -n "$(new_procs | while read -r p; do [ "$(comm_of "$p")" = nsboxd ] && echo "$p"; done)" ]; do
                sleep 0.2
                n=$((n + 1))
        done
        left=$(new_procs)
        if [ -n "$left" ]; then
                for p in $left; do proc_desc "$p" >> "$2"; done
                # thaw first, so that nothing frozen lingers
                for d in $(find $CG -name cgroup.freeze); do
                        [ "$(cat "$d")" = 1 ] && echo 0 > "$d"
                done
                for p in $left; do kill -KILL "$p" 2>/dev/null; done
                n=0
                while [ $n -lt 25 ] && [ -n "$(new_procs)" ]; do sleep 0.2; n=$((n + 1)); done
                for p in $(new_procs); do echo "could not kill: $(proc_desc "$p")" >> "$1"; done
        fi
        for parent in $CG/nsbox $CG/user4242/nsbox $CG/svc; do
                [ -d "$parent" ] || continue
                for d in $(find "$parent" -mindepth 1 -type d | sort -r); do
                        echo "removed cgroup left behind: $d ($(wc -l < "$d/cgroup.procs") procs)" >> "$1"
                        [ -e "$d/cgroup.freeze" ] && echo 0 > "$d/cgroup.freeze" 2>/dev/null
                        [ -e "$d/cgroup.kill" ] && echo 1 > "$d/cgroup.kill" 2>/dev/null
                        n=0
                        while ! rmdir "$d" 2>/dev/null && [ $n -lt 25 ]; do sleep 0.2; n=$((n + 1)); done
                        [ -d "$d" ] && echo "could not remove cgroup $d" >> "$1"
                done
        done
        [ -d $CG/svc ] && rmdir $CG/svc 2>/dev/null
        rm -f /run/svc.sock /run/svc.sock.lock
}

report() { # PASS|FAIL name mode [reason]; details on stdin (the host shows them for a FAIL;
        # for a PASS they are only in the console log)
        sed 's/^/VMTEST | /'
        if [ "$1" = PASS ]; then
                echo "VMTEST PASS $2 [$3]"
        else
                echo "VMTEST FAIL $2 [$3]: $4"
        fi
}

run_one() { # name mode function
        local name=$1 mode=$2 fn=$3 now limit dir st t0 el reason
        now=$(($(uptime_cs) / 100))
        if [ "$now" -ge $((BUDGET - 15)) ]; then
                report FAIL "$name" "$mode" "not run: the VM's time budget (${BUDGET}s of uptime) is used up ($now s)" < /dev/null
                return
        fi
        limit=$PER_TEST_TIMEOUT
        [ $((BUDGET - now)) -lt "$limit" ] && limit=$((BUDGET - now))
        dir=/tmp/vmtest/$name.$mode
        rm -rf "$dir"
        mkdir -p "$dir"
        [ "$mode" = user ] && chown $TEST_UID:$TEST_UID "$dir"
        dmesg -c > /dev/null 2>&1
        echo "VMTEST start $name [$mode]"
        BEFORE=" $(all_procs | tr '\n' ' ') "
        t0=$(uptime_cs)
        (cd "$dir" && exec timeout -s KILL "$limit" /bin/sh /guest.sh --test "$name" "$mode" "$fn") \
                < /dev/null > "$dir/.log" 2>&1
        st=$?
        el=$(($(uptime_cs) - t0))
        cleanup_after "$dir/.notes" "$dir/.leftovers"
        dmesg -c > "$dir/.dmesg" 2>&1
        if [ "$st" = 0 ]; then
                reason=
        elif [ "$st" = 137 ] && [ "$el" -ge $((limit * 100 - 100)) ]; then
                reason="timed out after ${limit}s (killed)"
        else
                reason=$(sed -n 's/^REASON: //p' "$dir/.log" | tail -n 1)
                [ -n "$reason" ] || reason="exit status $st"
        fi
        if [ -s "$dir/.leftovers" ]; then
                reason="${reason:+$reason; }left $(wc -l < "$dir/.leftovers") process(es) running: $(sed 's/ (uid.*): /: /' "$dir/.leftovers" | oneline 300)"
        fi
        {
                grep -v '^REASON: ' "$dir/.log" | tail -n 25
                sed 's/^/leftover: /' "$dir/.leftovers"
                cat "$dir/.notes"
                # (tmpfs has no user xattrs in 6.1: overlayfs says so on every sandbox start)
                grep -v 'overlayfs: failed to set xattr on upper' "$dir/.dmesg" | tail -n 15 | sed 's/^/kernel: /'
                echo "($(secs "$el")s)"
        } | if [ -z "$reason" ]; then report PASS "$name" "$mode"; else report FAIL "$name" "$mode" "$reason"; fi
}

main() {
        local t name mode fn from
        mkdir -p /tmp/vmtest
        for t in $TESTS; do
                name=${t%%:*}
                mode=${t#*:}
                mode=${mode%%:*}
                echo "VMTEST plan $name [$mode]"
        done
        # vmtest.from=NAME.MODE on the kernel command line: the host rebooted a wedged guest; start
        # at the test that was running (the ones before it have reported)
        from=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^vmtest\.from=//p')
        for t in $TESTS; do
                name=${t%%:*}
                fn=${t##*:}
                mode=${t#*:}
                mode=${mode%%:*}
                if [ -n "$from" ]; then
                        [ "$from" = "$name.$mode" ] || continue
                        from=
                elif [ "${VMTEST_WEDGE:-}" = "$name.$mode" ]; then
                        # the harness's own check (NSBOX_VM_WEDGE): stand still as a wedged guest would
                        echo "VMTEST start $name [$mode]"
                        sleep 100000
                fi
                run_one "$name" "$mode" "$fn"
        done
}

# make bench (tests/vm/run --bench): what a cgroup costs at start, and freeze/thaw latency.
bench() {
        n=${VMTEST_BENCH_RUNS:-50}
        echo "VMTEST bench == in the VM ($(uname -r), $(nproc) vCPUs under TCG: slower than the host, compare within): $n runs each, interleaved, as root"
        coldstart "$n" \
                no-cgroup "NSBOX_CGROUP_PARENT=none nsbox run -- /bin/true" \
                cgroup "nsbox run -- /bin/true" \
                cgroup+limits "nsbox run --memory 256M --pids 512 --cpus 1 -- /bin/true" 2>&1 | sed 's/^/VMTEST bench /'
        bench-session --freeze "$n" 2>&1 | sed 's/^/VMTEST bench /'
}

case ${1:-} in
--test)
        export VMTEST_NAME=$2 VMTEST_AS=$3
        if [ "$3" = user ] && [ -n "$V1" ]; then # nothing to delegate in v1
                export VMTEST_CGPARENT=
                as_user /bin/sh /guest.sh --body "$4"
                exit $?
        fi
        if [ "$3" = user ]; then
                setup_user_cgroup
                echo 0 > $CG/user4242/session/cgroup.procs ||
                        fail "moving the test into $CG/user4242/session failed"
                export VMTEST_CGPARENT=$CG/user4242/nsbox
                as_user /bin/sh /guest.sh --body "$4"
                exit $?
        fi
        export VMTEST_CGPARENT=$CG/nsbox
        exec /bin/sh /guest.sh --body "$4"
        ;;
--body)
        "t_$2"
        ;;
"")
        if [ "${VMTEST_MODE:-test}" = bench ]; then bench; else main; fi
        ;;
--lib)
        # read by the systemd boot's script (systemd.sh) for the helpers and report
        ;;
*)
        echo "usage: guest.sh [--test NAME MODE FUNC | --body FUNC]" >&2
        exit 2
        ;;
esac
