#!/bin/sh
# The VM tier's systemd boot (busybox sh): systemd 252 is PID 1, nsbox is installed by `make
# install PREFIX=/usr`, nsboxd.socket is enabled, and this script runs as vmtest-systemd.service
# (Type=oneshot, after multi-user.target) to check nsboxd.service for real.  tests/vm/run builds
# the guest; the console protocol is guest.sh's (VMTEST plan/start/PASS/FAIL lines, "VMTEST |"
# details), whose helpers this script reads.
#
# The checks run in order, each in its own process under busybox timeout, and build on the
# state the previous ones leave (the first needs nsboxd not started yet); each still makes the
# sandboxes it needs.  Entry points: no argument: the runner; --check NAME: one check.

cmd=${1:-} check_name=${2:-}
set -- --lib
. /guest.sh

SOCK=/run/nsbox/nsboxd.sock
STATE=$SOCK.state
UNIT=nsboxd.service
CHECK_TIMEOUT=${VMTEST_TIMEOUT:-150}
CHECKS="socket_activation notify_ready delegate_memory stop_drains kill9_restart hardening keep_restart bad_config"

# ---- helpers -------------------------------------------------------------------------------

prop() { # unit property → its value
        systemctl show -p "$2" --value "$1" 2>/dev/null
}
main_pid() { prop $UNIT MainPID; }
active() { [ "$(prop $UNIT ActiveState)" = active ]; }
# The journal of nsboxd.service since its current (or last) start: its log lines only.
unit_journal() {
        journalctl -q -b -u $UNIT -o cat --no-pager 2>/dev/null
}
# Every mount point of the host's mount namespace, sorted: a sandbox must add none for good.
mount_points() {
        awk '{ print $5 }' /proc/self/mountinfo | sort
}
# What a check leaves after itself shows up in the next one; on a failure, what systemd says.
diagnose() {
        note "systemctl status $UNIT:"
        systemctl status --no-pager -n 0 $UNIT 2>&1 | sed 's/^/  /' | head -n 20
        note "the last lines of its journal:"
        unit_journal | tail -n 15 | sed 's/^/  /'
}
fail_diag() { # reason
        diagnose
        fail "$*"
}
create() { # [options] → the sandbox's id in $ID, or the check fails
        local st
        ID=$(nsbox create "$@" 2> "$T/create.err")
        st=$?
        [ "$st" = 0 ] && [ -n "$ID" ] ||
                fail_diag "nsbox create $*: exit status $st, id '$ID': $(tail -n 2 "$T/create.err" | oneline)${ERRS:+; $ERRS}"
}
# Processes of the sandbox's cgroup (its agent and the commands it runs).
cg_procs() { cat "$1/cgroup.procs" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'; }
# Wait up to N seconds of uptime for a command (guest.sh's wait_for counts tries, slow ones here).
wait_until() { # seconds cmd...
        local end=$(($(uptime_cs) + $1 * 100))
        shift
        until "$@"; do
                [ "$(uptime_cs)" -lt "$end" ] || return 1
                sleep 0.2
        done
}
none_running() { # pids...
        local p
        for p in "$@"; do running "$p" && return 1; done
        return 0
}

# ---- the checks ----------------------------------------------------------------------------

# nsboxd does not run until a client connects to the socket systemd listens on; then systemd
# starts nsboxd.service, which serves that socket (not one it made, not an nsboxd that nsbox
# started itself).
t_socket_activation() {
        expect "nsboxd.socket ActiveState" active "$(prop nsboxd.socket ActiveState)"
        expect "nsboxd.socket Listen" "$SOCK (Stream)" "$(prop nsboxd.socket Listen)"
        expect "$UNIT ActiveState before any client" inactive "$(prop $UNIT ActiveState)"
        d=$(daemon_pids | tr '\n' ' ')
        [ -z "$d" ] && [ "$(main_pid)" = 0 ] || check "an nsboxd runs before any client: pids '$d', MainPID $(main_pid)"
        [ -S "$SOCK" ] || fail_diag "$SOCK is not a socket before any client${ERRS:+; $ERRS}"
        create; id=$ID
        note "sandbox $id"
        expect "$UNIT ActiveState after nsbox create" active "$(prop $UNIT ActiveState)"
        expect "$UNIT TriggeredBy" nsboxd.socket "$(prop $UNIT TriggeredBy)"
        main=$(main_pid)
        d=$(daemon_pids | tr '\n' ' ' | sed 's/ $//')
        note "MainPID $main; nsboxd daemons: $d"
        expect "the nsboxd processes (not the agents)" "$main" "$d"
        expect "the cgroup of nsboxd" /sys/fs/cgroup/system.slice/$UNIT/supervisor "$(cgroup_of "$main")"
        [ ! -e /run/nsbox/nsboxd.log ] || check "nsbox started an nsboxd of its own: /run/nsbox/nsboxd.log: $(tail -n 2 /run/nsbox/nsboxd.log | oneline)"
        unit_journal | grep -q "listening on $SOCK (socket activation)" ||
                check "nsboxd's journal lacks 'listening on $SOCK (socket activation)': $(unit_journal | tail -n 3 | oneline)"
        out=$(nsbox exec "$id" -- echo hi 2>&1)
        expect "nsbox exec $id -- echo hi" hi "$out"
        nsbox rm "$id" > "$T/rm" 2>&1 || check "nsbox rm $id: $(oneline < "$T/rm")"
        [ -z "$ERRS" ] || diagnose
        finish
}

# Type=notify: systemd has the unit active only once READY=1 came, and shows nsboxd's STATUS=.
# From a stopped service, the activation is watched: no sample is active without the status.
t_notify_ready() {
        expect "$UNIT Type" notify "$(prop $UNIT Type)"
        expect "$UNIT NotifyAccess" main "$(prop $UNIT NotifyAccess)"
        systemctl stop $UNIT > "$T/stop" 2>&1 || fail_diag "systemctl stop $UNIT: $(oneline < "$T/stop")"
        expect "$UNIT ActiveState after systemctl stop" inactive "$(prop $UNIT ActiveState)"
        note "StatusText of the stopped service: '$(prop $UNIT StatusText)'"
        : > "$T/samples"
        (
                n=0
                while [ $n -lt 600 ]; do
                        s=$(systemctl show -p ActiveState -p SubState -p StatusText $UNIT 2>&1 | tr '\n' ' ')
                        echo "$s" >> "$T/samples"
                        case $s in *ActiveState=active*) exit 0 ;; esac
                        n=$((n + 1))
                done
        ) &
        sampler=$!
        out=$(nsbox ls 2>&1)
        st=$?
        [ "$st" = 0 ] || check "nsbox ls (the activating client): exit status $st: $(echo "$out" | oneline)"
        wait_until 60 eval '! running $sampler'
        kill "$sampler" 2>/dev/null
        wait "$sampler" 2>/dev/null
        note "$(wc -l < "$T/samples") samples: $(grep -c 'ActiveState=activating' "$T/samples") activating, $(grep -c 'ActiveState=active ' "$T/samples") active"
        note "first: $(head -n 1 "$T/samples")"
        note "last: $(tail -n 1 "$T/samples")"
        bad=$(grep 'ActiveState=active ' "$T/samples" | grep -v "StatusText=listening on $SOCK;" | head -n 1)
        [ -z "$bad" ] || check "active without nsboxd's status: $bad"
        grep -q 'ActiveState=active ' "$T/samples" || check "the unit never showed active after nsbox ls"
        expect "$UNIT ActiveState" active "$(prop $UNIT ActiveState)"
        expect "$UNIT SubState" running "$(prop $UNIT SubState)"
        status=$(prop $UNIT StatusText)
        note "StatusText=$status"
        case $status in
        "listening on $SOCK; 0 sandboxes adopted, 0 of a previous nsboxd cleaned up") ;;
        *) check "StatusText is '$status', expected 'listening on $SOCK; 0 sandboxes adopted, 0 of a previous nsboxd cleaned up'" ;;
        esac
        [ -z "$ERRS" ] || diagnose
        finish
}

# Delegate=yes: the sandboxes' cgroups are below the service's, with their limits, and a
# memory limit is enforced by the kernel (the command is OOM-killed, nsboxd is not).
t_delegate_memory() {
        expect "$UNIT Delegate" yes "$(prop $UNIT Delegate)"
        cgu=$(prop $UNIT ControlGroup)
        expect "$UNIT ControlGroup" /system.slice/$UNIT "$cgu"
        svc=/sys/fs/cgroup$cgu
        create --memory 64M; id=$ID
        main=$(main_pid)
        note "sandbox $id; MainPID $main in $(cgroup_of "$main")"
        obj=$(sandbox_obj "$id")
        note "ls --json: $obj"
        scg=$(jget "$obj" cgroup)
        check_cgroup_under "the sandbox's cgroup (nsbox ls --json)" "$scg" "$svc" || fail_diag "$ERRS"
        expect "$scg/memory.max" 67108864 "$(cat "$scg/memory.max" 2>&1)"
        sc=$(cat "$svc/cgroup.subtree_control" 2>&1)
        case " $sc " in *" memory "*) ;; *) check "$svc/cgroup.subtree_control is '$sc': no memory" ;; esac
        procs=$(cg_procs "$scg")
        [ -n "$procs" ] || check "no process in the sandbox's cgroup $scg"
        # busybox dd allocates its 256 MiB buffer and fills it
        nsbox call "$id" exec '{"cmd": ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"]}' > "$T/out" 2> "$T/err"
        st=$?
        r=$(tr -d ' \n' < "$T/out")
        note "nsbox call $id exec dd bs=256M: exit status $st: $(echo "$r" | cut -c1-300) $(oneline < "$T/err")"
        expect "exit status of nsbox call" 0 "$st"
        expect "reason" oom_killed "$(jget "$r" reason)"
        expect "exit_code" 137 "$(jget "$r" exit_code)"
        expect "oom_killed" true "$(jget "$r" oom_killed)"
        expect "MainPID after the OOM kill" "$main" "$(main_pid)"
        expect "$UNIT ActiveState after the OOM kill" active "$(prop $UNIT ActiveState)"
        wait_until 10 absent "$scg" || check "the OOM-killed sandbox's cgroup $scg still exists"
        # shellcheck disable=SC2086
        wait_until 10 none_running $procs || check "processes of the OOM-killed sandbox still run: $procs"
        nsbox rm "$id" > /dev/null 2>&1
        [ -z "$ERRS" ] || diagnose
        finish
}

# systemctl stop drains: a call in flight finishes, then every sandbox is destroyed with its
# processes, cgroup and mounts; the socket stays, systemd's, for the next activation.
t_stop_drains() {
        mounts0=$(mount_points)
        svc=/sys/fs/cgroup$(prop $UNIT ControlGroup)
        create; id=$ID
        scg=$(jget "$(sandbox_obj "$id")" cgroup)
        check_cgroup_under "the sandbox's cgroup" "$scg" "$svc" || fail_diag "$ERRS"
        nsbox call "$id" exec '{"shell": "sleep 4242", "background": true}' > "$T/bg" 2>&1 ||
                fail_diag "a background sleep in $id: $(oneline < "$T/bg")"
        # a call in flight: its output streams back, so 'started' says it runs; it ends 6 s
        # later, within the drain's 10 s
        nsbox exec "$id" -- sh -c 'echo started; sleep 6; echo drained' > "$T/inflight" 2>&1 &
        ep=$!
        started() { grep -q started "$T/inflight" || ! running "$ep"; }
        wait_until 60 started
        grep -q started "$T/inflight" || fail_diag "the call in flight did not start: $(oneline < "$T/inflight")"
        main=$(main_pid)
        procs=$(cg_procs "$scg")
        note "sandbox $id in $scg, processes $procs; MainPID $main"
        # not 'drained' yet, or the call ended before the stop and nothing was drained
        before=$(oneline < "$T/inflight")
        systemctl stop $UNIT > "$T/stop" 2>&1
        st=$?
        expect "the call's output when systemctl stop started" started "$before"
        expect "exit status of systemctl stop $UNIT" 0 "$st"
        [ "$st" = 0 ] || note "systemctl stop: $(oneline < "$T/stop")"
        wait "$ep"
        est=$?
        expect "the call in flight during the stop (exit status, output)" "0 started|drained" "$est $(oneline < "$T/inflight")"
        expect "$UNIT ActiveState after the stop" inactive "$(prop $UNIT ActiveState)"
        expect "$UNIT Result" success "$(prop $UNIT Result)"
        expect "nsboxd's exit status" 0 "$(prop $UNIT ExecMainStatus)"
        d=$(daemon_pids | tr '\n' ' ')
        [ -z "$d" ] || check "nsboxd processes left: $d"
        # shellcheck disable=SC2086
        none_running $main $procs || check "processes left of nsboxd $main and its sandbox ($procs)"
        [ -z "$(procs_cmdline_is 'sleep 4242')" ] || check "the sandbox's sleep 4242 still runs"
        [ ! -d "$scg" ] || check "the sandbox's cgroup $scg is left"
        [ ! -d "$svc" ] || check "the service's cgroup is left: $(find "$svc" -type d | oneline)"
        mounts1=$(mount_points)
        [ "$mounts0" = "$mounts1" ] ||
                check "mounts differ from before the sandbox: $(echo "$mounts0" > "$T/m0"; echo "$mounts1" | diff "$T/m0" - | grep '^[-+]/' | oneline)"
        [ -S "$SOCK" ] || check "$SOCK is gone after the stop"
        expect "nsboxd.socket ActiveState after the stop" active "$(prop nsboxd.socket ActiveState)"
        left=$(ls -A "$STATE" 2>&1)
        [ -z "$left" ] || check "state files left in $STATE: $(echo "$left" | oneline)"
        j=$(unit_journal)
        echo "$j" | grep -q 'stopping: no new requests' || check "nsboxd's journal lacks 'stopping: no new requests'"
        echo "$j" | grep -q 'stopping: destroying 1 sandboxes' || check "nsboxd's journal lacks 'stopping: destroying 1 sandboxes'"
        note "journal: $(echo "$j" | grep stopping | oneline)"
        out=$(nsbox ls 2>&1)
        st=$?
        [ "$st" = 0 ] && active || check "nsbox ls after the stop: exit status $st, $UNIT $(prop $UNIT ActiveState): $(echo "$out" | oneline)"
        [ -z "$ERRS" ] || diagnose
        finish
}

# kill -9 of nsboxd: its sandboxes die with it, systemd restarts it (Restart=on-failure), and
# the new nsboxd cleans up what the old one left (state files, cgroups): nothing is left.
t_kill9_restart() {
        mounts0=$(mount_points)
        create; id=$ID
        scg=$(jget "$(sandbox_obj "$id")" cgroup)
        nsbox call "$id" exec '{"shell": "sleep 4243", "background": true}' > "$T/bg" 2>&1 ||
                fail_diag "a background sleep in $id: $(oneline < "$T/bg")"
        old=$(main_pid)
        nr=$(prop $UNIT NRestarts)
        procs=$(cg_procs "$scg")
        [ -e "$STATE/$id.json" ] || check "no state file $STATE/$id.json while the sandbox runs"
        nstate=$(ls "$STATE" | grep -c '\.json$')
        note "sandbox $id in $scg, processes $procs; MainPID $old, NRestarts $nr"
        kill -9 "$old"
        restarted() { m=$(main_pid); [ "$m" != 0 ] && [ "$m" != "$old" ] && active; }
        if ! wait_until 60 restarted; then
                check "systemd did not restart $UNIT within 60 s of kill -9 (MainPID $(main_pid), $(prop $UNIT ActiveState)/$(prop $UNIT SubState))"
                nsbox ls > /dev/null 2>&1 # the next client would start it through the socket
        fi
        new=$(main_pid)
        note "new MainPID $new; NRestarts $(prop $UNIT NRestarts); Result $(prop $UNIT Result)"
        expect "NRestarts" $((nr + 1)) "$(prop $UNIT NRestarts)"
        running "$old" && check "the killed nsboxd $old still exists"
        d=$(daemon_pids | tr '\n' ' ' | sed 's/ $//')
        expect "the nsboxd processes" "$new" "$d"
        # shellcheck disable=SC2086
        wait_until 10 none_running $procs || check "processes of the old sandbox still run: $procs"
        [ -z "$(procs_cmdline_is 'sleep 4243')" ] || check "the old sandbox's sleep 4243 still runs"
        [ ! -d "$scg" ] || check "the old sandbox's cgroup $scg is left"
        [ ! -e "$STATE/$id.json" ] || check "its state file $STATE/$id.json is left"
        j=$(unit_journal)
        echo "$j" | grep -q "cleaned up sandbox $id left by nsboxd $old" ||
                check "the journal lacks 'cleaned up sandbox $id left by nsboxd $old': $(echo "$j" | grep -i clean | oneline)"
        expect "StatusText" "listening on $SOCK; 0 sandboxes adopted, $nstate of a previous nsboxd cleaned up" "$(prop $UNIT StatusText)"
        out=$(nsbox exec "$id" -- true 2>&1)
        st=$?
        [ "$st" = 125 ] && echo "$out" | grep -q not_found ||
                check "nsbox exec in the old sandbox: exit status $st, expected 125 with not_found: $(echo "$out" | oneline)"
        create; nid=$ID
        out=$(nsbox exec "$nid" -- echo again 2>&1)
        expect "a sandbox of the new nsboxd" again "$out"
        nsbox rm "$nid" > /dev/null 2>&1 || check "nsbox rm $nid failed"
        left=$(ls -A "$STATE" 2>&1)
        [ -z "$left" ] || check "state files left in $STATE: $(echo "$left" | oneline)"
        mounts1=$(mount_points)
        [ "$mounts0" = "$mounts1" ] || check "mounts differ from before the sandbox"
        [ -z "$ERRS" ] || diagnose
        finish
}

# The unit's hardening is in force on nsboxd (the checks above ran under it) and sandboxes
# still work under it: files, commands, their own limits.
t_hardening() {
        for p in NoNewPrivileges LockPersonality RestrictRealtime; do
                expect "$UNIT $p" yes "$(prop $UNIT $p)"
        done
        create --pids 32; id=$ID
        main=$(main_pid)
        expect "NoNewPrivs of nsboxd ($main)" 1 "$(awk '/^NoNewPrivs:/ { print $2 }' "/proc/$main/status")"
        # LockPersonality= and RestrictRealtime= are seccomp filters
        expect "Seccomp of nsboxd ($main)" 2 "$(awk '/^Seccomp:/ { print $2 }' "/proc/$main/status")"
        out=$(nsbox exec "$id" -- sh -c 'echo written > /workspace/f && cat /workspace/f && id -u' 2>&1)
        expect "a command writing and reading a file, then id -u" "written|1000" "$(echo "$out" | oneline)"
        nsbox call "$id" write_file '{"path": "/workspace/g", "content": "tool\n"}' > "$T/w" 2>&1 ||
                check "write_file: $(oneline < "$T/w")"
        out=$(nsbox call "$id" read_file '{"path": "/workspace/g"}' 2>&1 | tr -d ' \n')
        expect "read_file content" 'tool\n' "$(jget "$out" content)"
        scg=$(jget "$(sandbox_obj "$id")" cgroup)
        expect "$scg/pids.max" 32 "$(cat "$scg/pids.max" 2>&1)"
        nsbox rm "$id" > "$T/rm" 2>&1 || check "nsbox rm $id: $(oneline < "$T/rm")"
        [ -z "$ERRS" ] || diagnose
        finish
}

# on_stop "keep" under the unit as shipped (KillMode=mixed; nsboxd(8), SYSTEMD): the stopping
# nsboxd hands its sandbox to a keeper, systemd kills the keeper and the sandbox with the unit,
# and the next nsboxd removes what they left: nothing is left, nothing is adopted.
t_keep_restart() {
        conf=/etc/nsbox/nsboxd.json
        mkdir -p /etc/nsbox
        echo '{"on_stop": "keep"}' > "$conf"
        systemctl restart $UNIT > "$T/r0" 2>&1 || fail_diag "systemctl restart $UNIT with on_stop keep: $(oneline < "$T/r0")"
        create --label thread=keep; id=$ID
        scg=$(jget "$(sandbox_obj "$id")" cgroup)
        out=$(nsbox exec "$id" -- sh -c 'sleep 4244 > /dev/null 2>&1 & echo ok' 2>&1)
        expect "starting sleep 4244" ok "$out"
        procs=$(cg_procs "$scg")
        systemctl restart $UNIT > "$T/r1" 2>&1 || fail_diag "systemctl restart $UNIT with a sandbox to keep: $(oneline < "$T/r1")"
        note "StatusText: $(prop $UNIT StatusText)"
        j=$(journalctl -q -b -u $UNIT -o cat --no-pager 2>/dev/null)
        echo "$j" | grep -q "1 sandboxes kept for the next nsboxd by keeper" ||
                check "the journal lacks '1 sandboxes kept ... by keeper': $(echo "$j" | grep -i -e kept -e keeper | tail -n 3 | oneline)"
        expect "StatusText" "listening on $SOCK; 0 sandboxes adopted, 1 of a previous nsboxd cleaned up" "$(prop $UNIT StatusText)"
        # shellcheck disable=SC2086
        wait_until 10 none_running $procs || check "processes of the kept sandbox still run: $procs"
        [ -z "$(procs_cmdline_is 'sleep 4244')" ] || check "its sleep 4244 still runs"
        [ -z "$(pgrep -x nsboxd-keeper)" ] || check "a keeper still runs: $(pgrep -x nsboxd-keeper | oneline)"
        [ ! -d "$scg" ] || check "its cgroup $scg is left"
        left=$(ls -A "$STATE" 2>&1)
        [ -z "$left" ] || check "files left in $STATE: $(echo "$left" | oneline)"
        out=$(nsbox exec "$id" -- true 2>&1)
        echo "$out" | grep -q not_found || check "nsbox exec in the sandbox after the restart: $(echo "$out" | oneline)"
        # the next check starts from its own configuration; three restarts in a row count
        # against the unit's start limit: forget them
        rm -f "$conf"
        systemctl reset-failed $UNIT nsboxd.socket 2>/dev/null
        [ -z "$ERRS" ] || diagnose
        finish
}

# A bad configuration file: the service does not start, the journal says why in one line, a
# client fails with one line, nothing is left; once the file is fixed it works again.
t_bad_config() {
        conf=/etc/nsbox/nsboxd.json
        systemctl stop $UNIT > "$T/stop" 2>&1 || fail_diag "systemctl stop $UNIT: $(oneline < "$T/stop")"
        mkdir -p /etc/nsbox
        echo '{"bogus": 1}' > "$conf"
        out=$(nsboxd --check-config 2>&1)
        st=$?
        note "nsboxd --check-config: exit status $st: $(echo "$out" | oneline)"
        [ "$st" != 0 ] || check "nsboxd --check-config accepted $conf"
        expect "nsboxd --check-config's message" "nsboxd: $conf: key 'bogus': unknown key" "$out"
        out=$(timeout 60 nsbox ls 2>&1)
        st=$?
        note "nsbox ls: exit status $st: $(echo "$out" | oneline)"
        [ "$st" != 0 ] || check "nsbox ls succeeded with a bad $conf"
        expect "lines nsbox ls printed" 1 "$(echo "$out" | grep -c .)"
        wait_until 30 eval '[ "$(prop $UNIT ActiveState)" = failed ]'
        note "$UNIT: $(prop $UNIT ActiveState)/$(prop $UNIT SubState), Result $(prop $UNIT Result), NRestarts $(prop $UNIT NRestarts); nsboxd.socket: $(prop nsboxd.socket ActiveState), Result $(prop nsboxd.socket Result)"
        expect "$UNIT ActiveState" failed "$(prop $UNIT ActiveState)"
        unit_journal | grep -q "key 'bogus': unknown key" ||
                check "the journal lacks nsboxd's message: $(unit_journal | tail -n 3 | oneline)"
        d=$(daemon_pids | tr '\n' ' ')
        [ -z "$d" ] || check "nsboxd processes run: $(for p in $d; do proc_desc "$p"; done | oneline)"
        left=$(find /sys/fs/cgroup/system.slice/$UNIT -mindepth 1 -type d 2>/dev/null)
        [ -z "$left" ] || check "cgroups left: $(echo "$left" | oneline)"
        # fixed: the units start again as an administrator starts them
        rm -f "$conf"
        systemctl reset-failed $UNIT nsboxd.socket > "$T/reset" 2>&1
        systemctl start nsboxd.socket > "$T/start" 2>&1 || check "systemctl start nsboxd.socket: $(oneline < "$T/start")"
        create; id=$ID
        out=$(nsbox exec "$id" -- echo back 2>&1)
        expect "a sandbox once the file is fixed" back "$out"
        expect "the nsboxd processes" "$(main_pid)" "$(daemon_pids | tr '\n' ' ' | sed 's/ $//')"
        nsbox rm "$id" > /dev/null 2>&1 || check "nsbox rm $id failed"
        [ -z "$ERRS" ] || diagnose
        finish
}

# ---- the runner ----------------------------------------------------------------------------

run_check() { # name
        local name=$1 dir=/tmp/vmtest-systemd/$1 st reason t0 el
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "VMTEST start $name [root]"
        t0=$(uptime_cs)
        (cd "$dir" && exec timeout -s KILL "$CHECK_TIMEOUT" /bin/sh /vmtest-systemd.sh --check "$name") \
                < /dev/null > "$dir/.log" 2>&1
        st=$?
        el=$(($(uptime_cs) - t0))
        if [ "$st" = 0 ]; then
                reason=
        elif [ "$st" = 137 ] && [ "$el" -ge $((CHECK_TIMEOUT * 100 - 100)) ]; then
                reason="timed out after ${CHECK_TIMEOUT}s (killed)"
        else
                reason=$(sed -n 's/^REASON: //p' "$dir/.log" | tail -n 1)
                [ -n "$reason" ] || reason="exit status $st"
        fi
        {
                grep -v '^REASON: ' "$dir/.log" | tail -n 40
                echo "($(secs "$el")s)"
        } | if [ -z "$reason" ]; then report PASS "$name" root; else report FAIL "$name" root "$reason"; fi
}

case $cmd in
--check)
        T=$PWD
        "t_$check_name"
        ;;
"")
        . /etc/vmtest.env
        echo "VMTEST | systemd $(systemctl --version | head -n 1 | cut -d' ' -f2) is PID 1 ($(comm_of 1)), up $(secs "$(uptime_cs)")s; state $(systemctl is-system-running 2>&1)"
        for c in $CHECKS; do echo "VMTEST plan $c [root]"; done
        for c in $CHECKS; do run_check "$c"; done
        failed=$(systemctl list-units --failed --plain --no-legend --no-pager 2>&1 | oneline)
        echo "VMTEST | failed units at the end: ${failed:-none}"
        echo "VMTEST done"
        ;;
*)
        echo "usage: vmtest-systemd.sh [--check NAME]" >&2
        exit 2
        ;;
esac
