#!/usr/bin/env bash
# The command line a docker, bubblewrap or E2B user expects (issue 27): did you mean, help CMD,
# version, completion, inspect, ls -q, rm --all, exec -w/-e K/--env-file, options after exec's
# ID, one exit status rule, nsbox mcp checking its options first, JSON without float noise,
# progress lines on a terminal only.
# Runs as root and as an unprivileged user (tests/run does both).
. "$(dirname "$0")/../lib.sh"

# A daemon of our own on a socket of our own, stopped with its sandboxes when this file ends.
SESSION_DIR=$(mktemp -d /tmp/nsbox-cli.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
trap 'stop_file_daemon "$SESSION_DIR"' EXIT

MY_SANDBOXES=""
new_sandbox() { # VAR [create options...]
        local _var=$1 _sid
        shift
        _sid=$("$NSBOX" create "$@" 2>&1) || fail "nsbox create: $_sid"
        [[ $_sid =~ ^[0-9a-f]{32}$ ]] || fail "nsbox create printed '$_sid'"
        MY_SANDBOXES="$MY_SANDBOXES $_sid"
        trap '[ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES >/dev/null 2>&1' EXIT
        printf -v "$_var" %s "$_sid"
}

ids() { "$NSBOX" ls --json | python3 -c 'import json, sys; print(" ".join(sorted(s["id"] for s in json.load(sys.stdin))))'; }

# ---- finding one's way ---------------------------------------------------------------------

test_a_typo_of_a_command_or_option_names_the_closest_one() {
        assert_status 125 "$NSBOX" exce x -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "unknown command 'exce' (did you mean exec?"
        assert_status 125 "$NSBOX" ps
        assert_contains "$OUT" "did you mean ls?"
        # docker's names for what nsbox calls otherwise: what it does here, not the nearest spelling
        assert_status 125 "$NSBOX" stop x
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "unknown command 'stop' (did you mean rm or pause?"
        assert_status 125 "$NSBOX" start x
        assert_contains "$OUT" "did you mean resume?"
        assert_status 125 "$NSBOX" kill x
        assert_contains "$OUT" "did you mean rm -f?"
        assert_status 125 "$NSBOX" images
        assert_contains "$OUT" "did you mean image ls?"
        assert_status 125 "$NSBOX" frobnicate
        assert_one_line_error "$OUT"
        assert_not_contains "$OUT" "did you mean"
        assert_status 125 "$NSBOX" --versoin
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "unknown option '--versoin' (did you mean --version?"
        assert_status 125 "$NSBOX" run --tiemout 1 -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "unknown option '--tiemout' (did you mean --timeout?"
        assert_status 125 "$NSBOX" create --network nat
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "did you mean --net?"
        assert_status 125 "$NSBOX" exec --tiemout 1 0123456789abcdef -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "did you mean --timeout?"
        assert_status 125 "$NSBOX" ls --jsn
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "did you mean --json?"
        assert_status 125 "$NSBOX" rm --al
        assert_contains "$OUT" "did you mean --all?"
        assert_status 125 "$NSBOX" run --zzzzzzzz -- true
        assert_one_line_error "$OUT"
        assert_not_contains "$OUT" "did you mean"
        assert_status 125 "$NSBOX" cp --recursiv "$TEST_TMP" 0123456789abcdef:/tmp/x
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "did you mean --recursive?"
}

# what a docker user types: -w and --rm work; docker's spellings of what nsbox names otherwise
# are refused in one line that says what to use, and start nothing
test_docker_flags_work_or_say_what_to_use() {
        assert_status 0 "$NSBOX" run --rm -w /tmp/w -- pwd
        assert_eq /tmp/w "$OUT" "run --rm -w"
        local id
        new_sandbox id -w /workspace/w
        assert_status 0 "$NSBOX" exec "$id" -- pwd
        assert_eq /workspace/w "$OUT" "create -w"
        local before a
        before=$("$NSBOX" ls -q | sort)
        for a in "-v /tmp:/x:ro|--bind SRC:DST" "--volume=/tmp:/x|--bind SRC:DST" "-u root|--policy root" "--user=1000|--policy root" \
                "-p 8080:80|--publish" "-m 512m|--memory SIZE" "-d|nsbox exec -d" "--entrypoint sh|follows --"; do
                # shellcheck disable=SC2086  # the option and its value, as typed
                assert_status 125 "$NSBOX" run ${a%%|*} -- touch /tmp/ran
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "${a#*|}" "run ${a%%|*}"
        done
        assert_eq "$before" "$("$NSBOX" ls -q | sort)" "sandboxes after the refused runs"
}

test_help_command_prints_that_commands_help() {
        local cmd want
        for cmd in run create exec ls rm inspect cp completion version mcp; do
                want=$("$NSBOX" "$cmd" --help) || fail "nsbox $cmd --help failed"
                assert_status 0 "$NSBOX" help "$cmd"
                assert_eq "$want" "$OUT" "nsbox help $cmd"
        done
        assert_status 0 "$NSBOX" help
        assert_eq "$("$NSBOX" --help)" "$OUT" "nsbox help"
        assert_status 125 "$NSBOX" help exce
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "did you mean exec?"
}

test_version_is_the_same_as_dash_dash_version() {
        assert_status 0 "$NSBOX" version
        [[ $OUT =~ ^nsbox\ [0-9] ]] || fail "nsbox version printed '$OUT'"
        assert_eq "$("$NSBOX" --version)" "$OUT"
        assert_status 125 "$NSBOX" version extra
        assert_one_line_error "$OUT"
}

# every long option a command's --help shows, the bash completion offers, and the other way
# round: both come from the same tables
test_completion_scripts_complete_commands_and_every_option() {
        assert_status 0 bash -c "source <('$NSBOX' completion bash) && COMP_WORDS=(nsbox ex); COMP_CWORD=1; _nsbox && echo \"\${COMPREPLY[*]}\""
        assert_eq exec "$OUT" "nsbox ex<TAB>"
        assert_status 0 bash -c "source <('$NSBOX' completion bash) && COMP_WORDS=(nsbox exec --ti); COMP_CWORD=2; _nsbox && echo \"\${COMPREPLY[*]}\""
        assert_eq "--timeout" "$OUT" "nsbox exec --ti<TAB>"
        assert_status 0 bash -c "source <('$NSBOX' completion bash) && COMP_WORDS=(nsbox completion z); COMP_CWORD=2; _nsbox && echo \"\${COMPREPLY[*]}\""
        assert_eq zsh "$OUT" "nsbox completion z<TAB>"
        local cmd helpopts compopts
        for cmd in run create exec logs watch ls rm mcp tools; do
                helpopts=$("$NSBOX" "$cmd" --help | grep -oE '(^|[ ,])--[a-z][a-z-]*' | tr -d ' ,' | sort -u | tr '\n' ' ')
                compopts=$(bash -c "source <('$NSBOX' completion bash) && COMP_WORDS=(nsbox $cmd --); COMP_CWORD=2; _nsbox && printf '%s\n' \"\${COMPREPLY[@]}\"" |
                        sort -u | tr '\n' ' ')
                for o in $helpopts; do assert_contains " $compopts" " $o " "completion of nsbox $cmd"; done
        done
        command -v zsh > /dev/null && { zsh -n <("$NSBOX" completion zsh) || fail "zsh script does not parse"; }
        if command -v fish > /dev/null; then
                "$NSBOX" completion fish > "$TEST_TMP/nsbox.fish"
                assert_eq exec "$(fish -c "source $TEST_TMP/nsbox.fish; complete -C 'nsbox ex'")" "fish: nsbox ex<TAB>"
                assert_eq --timeout "$(fish -c "source $TEST_TMP/nsbox.fish; complete -C 'nsbox exec --ti'" | cut -f1)" "fish: nsbox exec --ti<TAB>"
        fi
        assert_status 0 "$NSBOX" completion fish
        assert_contains "$OUT" "__fish_seen_subcommand_from exec' -l timeout"
        assert_status 125 "$NSBOX" completion tcsh
        assert_one_line_error "$OUT"
}

# man pages and --help agree with what nsbox takes: every option the completion offers (the
# command tables) is in nsbox(1), and in the command's --help (those of the options table are
# listed by run's)
test_every_option_is_in_the_man_page_and_its_help() {
        local complete="source <('$NSBOX' completion bash) 2>/dev/null; _nsbox; printf '%s\\n' \"\${COMPREPLY[@]}\""
        local cmds c o roff help opts
        cmds=$(bash -c "COMP_WORDS=(nsbox ''); COMP_CWORD=1; $complete" | grep -v '^-')
        [ "$(echo "$cmds" | wc -w)" -gt 20 ] || fail "completion lists commands: $cmds"
        for c in $cmds; do
                help=$("$NSBOX" "$c" --help) || fail "nsbox $c --help"
                [ "$c" = run ] && help="$help $("$NSBOX" create --help)"
                case $c in create | mcp | replay) help="$help $("$NSBOX" run --help) $("$NSBOX" create --help)" ;; esac
                opts=$(bash -c "COMP_WORDS=(nsbox $c --); COMP_CWORD=2; $complete")
                for o in $opts; do
                        roff=$(printf '%s' "$o" | sed 's/-/\\-/g')
                        grep -qF -- "$roff" "$NSBOX_SRC/man/nsbox.1" || fail "nsbox $c $o is not in man/nsbox.1"
                        [ "$o" = --help ] || assert_contains "$help" "$o" "nsbox $c --help"
                done
                # and the other way: each option line of its own --help ("  -x, --long ARG ...")
                # is one the command takes (completion's table) and is in the man page
                for o in $("$NSBOX" "$c" --help | grep -oE '^  +(-[a-zA-Z0-9], )?--?[a-zA-Z0-9][a-z0-9-]*' | grep -oE -- '--?[a-zA-Z0-9][a-z0-9-]*'); do
                        [ "$o" = --help ] || [ "$o" = -h ] && continue
                        bash -c "COMP_WORDS=(nsbox $c -); COMP_CWORD=2; $complete" | grep -qx -- "$o" || fail "nsbox $c --help shows $o, which completion does not offer"
                        roff=$(printf '%s' "$o" | sed 's/-/\\-/g')
                        grep -qF -- "$roff" "$NSBOX_SRC/man/nsbox.1" || fail "nsbox $c --help shows $o, which man/nsbox.1 does not have"
                done
        done
        # and each option nsbox(1)'s SYNOPSIS gives a command is one that command takes
        local pairs
        pairs=$(python3 - "$NSBOX_SRC/man/nsbox.1" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
cmd = None
for l in t[t.index(".SH SYNOPSIS"):t.index(".SH DESCRIPTION")].split("\n"):
    m = re.match(r"\.B nsbox ([a-z][a-z\\-]*|\\-)", l)  # a command, or nsbox's own option
    if m:
        cmd = None if m.group(1) == "\\-" else m.group(1).replace("\\-", "-")
    for o in re.findall(r"(?<![A-Za-z0-9])\\-(\\-[a-z][a-z0-9\\-]*|[a-zA-Z](?![a-zA-Z]))", l) if cmd else []:
        print(cmd, ("-" + o.replace("\\-", "-")).rstrip("-"))
PY
)
        [ "$(printf '%s\n' "$pairs" | wc -l)" -gt 30 ] || fail "options read from nsbox(1)'s SYNOPSIS: $pairs"
        while read -r c o; do
                [ "$o" = --help ] && continue
                bash -c "COMP_WORDS=(nsbox $c -); COMP_CWORD=2; $complete" | grep -qx -- "$o" || fail "nsbox(1)'s SYNOPSIS gives nsbox $c $o, which nsbox $c does not take"
        done <<< "$pairs"
}

# ---- sandboxes -----------------------------------------------------------------------------

test_ls_q_prints_ids_and_inspect_prints_ls_json_objects() {
        local a b
        new_sandbox a --label cli=inspect
        new_sandbox b --label cli=inspect
        assert_status 0 "$NSBOX" ls -q --label cli=inspect
        assert_eq "$(printf '%s\n' "$a" "$b" | sort)" "$(printf '%s\n' "$OUT" | sort)" "ls -q"
        assert_status 0 "$NSBOX" inspect "$a" "${b:0:8}"
        printf '%s' "$OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert [s["id"] for s in d] == sys.argv[1:], d
assert d[0]["labels"] == {"cli": "inspect"}, d' "$a" "$b" || fail "inspect printed: $OUT"
        # not found: said, exit status as every command's, the others still printed
        assert_status 125 "$NSBOX" inspect "$a" 0123456789abcdef0123456789abcdef
        assert_contains "$OUT" "nsbox: inspect: not_found"
        assert_contains "$OUT" "$a"
        assert_status 125 "$NSBOX" inspect
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" ls -q --json
        assert_one_line_error "$OUT"
}

test_rm_all_removes_only_the_labelled_sandboxes() {
        local keep gone1 gone2 before
        new_sandbox keep --label cli=keep
        new_sandbox gone1 --label cli=gone
        new_sandbox gone2 --label cli=gone --label other=x
        assert_status 0 "$NSBOX" rm --all --label cli=gone
        before=$(ids)
        assert_contains "$before" "$keep"
        assert_not_contains "$before" "$gone1"
        assert_not_contains "$before" "$gone2"
        assert_status 125 "$NSBOX" rm --all "$keep"
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" rm --label cli=keep
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" rm --all --label nolabel
        assert_one_line_error "$OUT"
        assert_contains "$(ids)" "$keep" "bad rm --all left the sandbox"
        assert_status 0 "$NSBOX" rm --all
        assert_eq "" "$(ids)" "after rm --all"
        assert_status 0 "$NSBOX" rm --all # nothing to remove is not an error
        MY_SANDBOXES=""
}

# ---- exec's options ------------------------------------------------------------------------

test_exec_takes_workdir_env_passthrough_and_env_file() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" exec -w /tmp "$id" -- pwd
        assert_eq /tmp "$OUT"
        assert_status 0 "$NSBOX" exec --workdir=/tmp "$id" pwd
        assert_eq /tmp "$OUT"
        assert_status 0 "$NSBOX" exec --cwd /tmp "$id" pwd
        assert_eq /tmp "$OUT"
        assert_status 0 env CLI_PASS=from-host "$NSBOX" exec -e CLI_PASS -e CLI_UNSET "$id" -- sh -c 'echo "$CLI_PASS ${CLI_UNSET-unset}"'
        assert_eq "from-host unset" "$OUT"
        printf '# a comment\n\nA=1\n  B=two words\nC=x=y\nCLI_PASS\n' > "$TEST_TMP/env"
        assert_status 0 env CLI_PASS=p "$NSBOX" exec --env-file "$TEST_TMP/env" -e A=override "$id" -- sh -c 'echo "$A|$B|$C|$CLI_PASS"'
        assert_eq "override|two words|x=y|p" "$OUT"
        assert_status 0 env CLI_PASS=p "$NSBOX" run --env-file "$TEST_TMP/env" -- sh -c 'echo "$A|$B|$C|$CLI_PASS"'
        assert_eq "1|two words|x=y|p" "$OUT"
        local c
        new_sandbox c --env-file "$TEST_TMP/env"
        assert_status 0 "$NSBOX" exec "$c" -- sh -c 'echo "$A|$B"'
        assert_eq "1|two words" "$OUT"
}

test_a_bad_env_file_is_a_one_line_error_naming_the_line() {
        local id cmd
        new_sandbox id
        printf 'A=1\nnot a name=2\n' > "$TEST_TMP/bad"
        head -c $((2 << 20)) /dev/zero | tr '\0' 'A' > "$TEST_TMP/huge"
        for cmd in "exec --env-file $TEST_TMP/bad $id -- true" "run --env-file $TEST_TMP/bad -- true" "create --env-file $TEST_TMP/bad"; do
                # shellcheck disable=SC2086
                assert_status 125 "$NSBOX" $cmd
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "line 2"
        done
        assert_status 125 "$NSBOX" exec --env-file "$TEST_TMP/huge" "$id" -- true
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" exec --env-file "$TEST_TMP/nosuch" "$id" -- true
        assert_one_line_error "$OUT"
        assert_eq "$id" "$("$NSBOX" ls -q)" "no sandbox was made"
}

test_an_option_after_exec_id_is_refused_not_run() {
        local id
        new_sandbox id
        assert_status 125 "$NSBOX" exec "$id" --timeout 1 -- sleep 3
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "options go before the ID"
        # after --, a command may start with '-' (and then is not found: 127)
        assert_status 127 "$NSBOX" exec "$id" -- --timeout
        assert_status 124 "$NSBOX" exec --timeout 0.5 "$id" -- sleep 3
}

# "nsbox rm ID -f": refused before any sandbox is acted on, never taken for an ID
test_an_option_after_rm_ids_is_refused_before_any_is_acted_on() {
        local id cmd
        new_sandbox id
        for cmd in "rm $id -f" "rm $id --all" "pause $id --json" "resume $id -x" "inspect $id --json"; do
                # shellcheck disable=SC2086
                assert_status 125 "$NSBOX" $cmd
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "after a sandbox ID: options go before the IDs" "nsbox $cmd"
        done
        assert_eq "$id" "$("$NSBOX" ls -q)" "the sandbox is still there"
        assert_eq running "$("$NSBOX" ls --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["state"])')" "and not paused"
        assert_status 0 "$NSBOX" inspect -- "$id"
        assert_status 0 "$NSBOX" rm -- "$id"
        MY_SANDBOXES=""
}

# ---- exit statuses -------------------------------------------------------------------------

# 125: nothing was done (usage, nsbox, or nsboxd said no), whatever the command
test_not_found_exits_125_from_every_command() {
        local gone=0123456789abcdef0123456789abcdef cmd
        for cmd in "exec $gone -- true" "rm $gone" "pause $gone" "resume $gone" "inspect $gone" "logs $gone 1" "attach $gone 1" \
                "set-timeout $gone 10" "reset $gone" "snapshot $gone snap" "watch $gone /tmp" "cp $gone:/etc/hostname $TEST_TMP/x" \
                "snapshot rm nosuch-snapshot" "create --from nosuch-snapshot"; do
                # shellcheck disable=SC2086
                assert_status 125 "$NSBOX" $cmd
                assert_one_line_error "$OUT"
        done
        # call's status is the call's: 1 when it returns an error
        assert_status 1 "$NSBOX" call $gone exists '{"path": "."}'
        assert_status 0 "$NSBOX" rm -f $gone
}

# ---- mcp -----------------------------------------------------------------------------------

test_mcp_with_a_bad_option_exits_before_initialize() {
        local init='{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}'
        local bad
        for bad in "--policy nosuch" "--memory 1" "--workdir relative" "--net bogus"; do
                # shellcheck disable=SC2086
                OUT=$(printf '%s\n' "$init" | "$NSBOX" mcp $bad 2> "$TEST_TMP/err")
                local st=$?
                assert_eq 125 "$st" "nsbox mcp $bad"
                assert_eq "" "$OUT" "nsbox mcp $bad answered"
                assert_one_line_error "$(cat "$TEST_TMP/err")"
        done
}

# ---- JSON ----------------------------------------------------------------------------------

test_json_reals_have_no_float_noise() {
        local id
        new_sandbox id
        assert_status 0 "$NSBOX" exec --json "$id" -- sleep 0.01
        assert_contains "$OUT" '"duration_ms"'
        printf '%s' "$OUT" | grep -qE '[0-9]\.[0-9]{4,}' && fail "exec --json has a real with more than 3 decimals: $OUT"
        assert_status 0 "$NSBOX" run --json -- true
        printf '%s' "$OUT" | grep -qE '[0-9]\.[0-9]{4,}' && fail "run --json has a real with more than 3 decimals: $OUT"
        "$NSBOX" set-timeout "$id" 100 > /dev/null || fail "set-timeout"
        assert_status 0 "$NSBOX" inspect "$id"
        printf '%s' "$OUT" | grep -qE '[0-9]\.[0-9]{4,}' && fail "inspect has a real with more than 3 decimals: $OUT"
        true
}

# ---- nsbox daemon --------------------------------------------------------------------------

test_daemon_status_stop_restart_act_on_our_own_daemon() {
        local pid pid2
        assert_status 0 "$NSBOX" ls -q # started if it was not
        assert_status 0 "$NSBOX" daemon status
        assert_contains "$OUT" "socket     $NSBOX_SOCKET"
        pid=$(printf '%s\n' "$OUT" | awk '$1 == "pid" { print $2 }')
        [[ $pid =~ ^[0-9]+$ ]] || fail "no pid in: $OUT"
        assert_eq "$pid" "$(daemon_pid)" "the pid status prints"
        assert_status 0 "$NSBOX" daemon status --json
        assert_eq "$pid" "$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])')"
        assert_status 0 "$NSBOX" daemon stop
        assert_contains "$OUT" "stopped (pid $pid)"
        [ -e "$NSBOX_SOCKET" ] && fail "the socket is still there after daemon stop"
        pid_alive "$pid" && fail "nsboxd $pid is still running after daemon stop"
        assert_status 3 "$NSBOX" daemon status
        assert_contains "$OUT" "not running"
        assert_status 0 "$NSBOX" daemon stop
        assert_status 0 "$NSBOX" daemon restart
        pid2=$(printf '%s\n' "$OUT" | sed -n 's/.*started (pid \([0-9]*\)).*/\1/p')
        [[ $pid2 =~ ^[0-9]+$ ]] && [ "$pid2" != "$pid" ] || fail "restart printed: $OUT"
        assert_status 0 "$NSBOX" daemon restart
        assert_contains "$OUT" "stopped (pid $pid2)"
        pid_alive "$pid2" && fail "nsboxd $pid2 is still running after restart"
        assert_status 125 "$NSBOX" daemon frob
        assert_one_line_error "$OUT"
        assert_status 125 "$NSBOX" daemon stop --json
        assert_one_line_error "$OUT"
}

test_a_short_id_prefix_says_too_short_not_no_sandbox() {
        local id p cmd
        new_sandbox id
        for p in "${id:0:3}" "${id:0:1}"; do
                for cmd in "exec $p -- true" "rm $p" "inspect $p" "pause $p" "logs $p 1" "set-timeout $p 5" "snapshot $p s"; do
                        # shellcheck disable=SC2086
                        assert_status 125 "$NSBOX" $cmd
                        assert_one_line_error "$OUT"
                        assert_contains "$OUT" "id prefix '$p' is too short: give at least 4 characters" "nsbox $cmd"
                done
        done
        assert_status 0 "$NSBOX" exec "${id:0:4}" -- true
}

test_pidof_nsboxd_finds_daemons_not_agents() {
        local id dpid agents p
        new_sandbox id
        dpid=$(daemon_pid)
        agents=$(pgrep -P "$dpid")
        [ -n "$agents" ] || fail "no child of nsboxd $dpid"
        for p in $(pidof nsboxd); do
                [ "$(cat "/proc/$p/comm" 2>/dev/null)" = nsboxd ] || fail "pidof nsboxd gave $p: $(cat "/proc/$p/comm")"
                for a in $agents; do [ "$a" != "$p" ] || fail "pidof nsboxd finds the agent $a"; done
        done
        pidof nsboxd | tr ' ' '\n' | grep -qx "$dpid" || fail "pidof nsboxd does not find the daemon $dpid"
        for a in $agents; do assert_eq nsbox-agent "$(cat "/proc/$a/comm")" "the agent's name"; done
}

test_ls_policy_column_names_the_policy_used() {
        local a b
        new_sandbox a
        cp "$NSBOX_SRC/policy/default.json" "$TEST_TMP/mine.json"
        chmod 644 "$TEST_TMP/mine.json"
        new_sandbox b --policy "$TEST_TMP/mine.json"
        assert_status 0 "$NSBOX" ls
        assert_eq default "$(printf '%s\n' "$OUT" | awk -v id="$a" '$1 == id { print $4 }')" "POLICY without --policy"
        assert_eq mine.json "$(printf '%s\n' "$OUT" | awk -v id="$b" '$1 == id { print $4 }')" "POLICY of --policy FILE"
        assert_status 0 "$NSBOX" rm "$a" "$b"
}

# ---- progress on a terminal ----------------------------------------------------------------

test_a_progress_line_on_a_terminal_and_none_in_a_pipe() {
        local repo="$TEST_TMP/repo" id id2 snap="cli-progress-$$"
        command -v script > /dev/null || skip "no script(1) for a terminal"
        command -v git > /dev/null || skip "no git on the host to build a test repository"
        git init -q "$repo" && git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m one || fail "git"
        # a terminal: the line, then erased (\r ESC[K), then the id on a clean line
        OUT=$(script -qec "'$NSBOX' create --repo '$repo'" /dev/null) || fail "create --repo on a terminal: $OUT"
        assert_contains "$OUT" "nsbox: cloning $repo..."
        id=$(printf '%s' "$OUT" | grep -oE '[0-9a-f]{32}' | tail -n 1)
        [ -n "$id" ] || fail "no id in: $OUT"
        MY_SANDBOXES="$MY_SANDBOXES $id"
        OUT=$(script -qec "'$NSBOX' snapshot $id $snap" /dev/null) || fail "snapshot on a terminal: $OUT"
        assert_contains "$OUT" "nsbox: snapshotting $id as $snap..."
        assert_status 0 "$NSBOX" snapshot rm "$snap"
        # a pipe: nothing on stderr
        id2=$("$NSBOX" create --repo "$repo" 2> "$TEST_TMP/err") || fail "create --repo: $(cat "$TEST_TMP/err")"
        MY_SANDBOXES="$MY_SANDBOXES $id2"
        assert_eq "" "$(cat "$TEST_TMP/err")" "stderr of create --repo into a file"
        "$NSBOX" snapshot "$id2" "$snap" > /dev/null 2> "$TEST_TMP/err" || fail "snapshot: $(cat "$TEST_TMP/err")"
        assert_eq "" "$(cat "$TEST_TMP/err")" "stderr of snapshot into a file"
        assert_status 0 "$NSBOX" rm "$id" "$id2"
        assert_status 0 "$NSBOX" snapshot rm "$snap"
        # an error on a terminal is a line of its own
        OUT=$(script -qec "'$NSBOX' create --repo '$TEST_TMP/nosuch'" /dev/null)
        assert_contains "$OUT" "nsbox: create: "
        # an image import (on a store of this test's own): the line on a terminal, none in a pipe
        local img="$TEST_TMP/img"
        python3 "$NSBOX_SRC/tests/integration/mkimage.py" oci "$img" cli-progress:1 || fail "mkimage.py"
        OUT=$(NSBOX_STORE="$TEST_TMP/store" script -qec "'$NSBOX' image import '$img'" /dev/null) || fail "image import on a terminal: $OUT"
        assert_contains "$OUT" "nsbox: importing $img..."
        assert_contains "$OUT" "cli-progress:1"
        NSBOX_STORE="$TEST_TMP/store" "$NSBOX" image import "$img" cli-progress:2 > /dev/null 2> "$TEST_TMP/err" || fail "image import: $(cat "$TEST_TMP/err")"
        assert_eq "" "$(cat "$TEST_TMP/err")" "stderr of image import into a file"
        NSBOX_STORE="$TEST_TMP/store" "$NSBOX" image rm cli-progress:1 cli-progress:2 > /dev/null || fail "image rm"
}

# a repository of N small files in one commit, built by git fast-import in a moment
make_big_repo() { # DIR N
        git init -q "$1" || return 1
        python3 - "$2" << 'EOF' | git -C "$1" fast-import --quiet || return 1
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
out.write(b"commit refs/heads/master\ncommitter t <t@t> 0 +0000\ndata 4\nbig\n")
for i in range(n):
    data = b"file %d\n" % i
    out.write(b"M 644 inline d%d/f%d\ndata %d\n%s\n" % (i % 50, i, len(data), data))
EOF
        git -C "$1" symbolic-ref HEAD refs/heads/master
}

test_a_clone_and_a_snapshot_on_a_terminal_count_and_a_pipe_shows_nothing() {
        local repo="$TEST_TMP/manyfiles" id id2 snap="cli-count-$$"
        command -v script > /dev/null || skip "no script(1) for a terminal"
        command -v git > /dev/null || skip "no git on the host to build a test repository"
        make_big_repo "$repo" 3000 || fail "make_big_repo"
        # a terminal: create asks nsboxd for progress events, and the line counts the files
        OUT=$(script -qec "'$NSBOX' create --repo '$repo'" /dev/null) || fail "create --repo on a terminal: $OUT"
        assert_contains "$OUT" "nsbox: cloning $repo... checking out "
        printf '%s' "$OUT" | grep -qE 'checking out [0-9]+/3000 files, [0-9]+s' || fail "no file count in: $OUT"
        id=$(printf '%s' "$OUT" | grep -oE '[0-9a-f]{32}' | tail -n 1)
        [ -n "$id" ] || fail "no id in: $OUT"
        MY_SANDBOXES="$MY_SANDBOXES $id"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ls d7 | wc -l'
        assert_eq 60 "$OUT" "the checkout's files"
        # a snapshot of a few thousand files: the line counts what is copied
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'mkdir w && cd w && seq 3000 | xargs touch && head -c 8000000 /dev/zero > z'
        OUT=$(script -qec "'$NSBOX' snapshot $id $snap" /dev/null) || fail "snapshot on a terminal: $OUT"
        printf '%s' "$OUT" | grep -qE "snapshotting $id as $snap\.\.\. copied [0-9]+ files \([0-9.]+ [KM]iB\), [0-9]+s" ||
                fail "no file count in: $OUT"
        assert_status 0 "$NSBOX" snapshot rm "$snap"
        # a pipe: nothing on stderr, and no event reached the client
        id2=$("$NSBOX" create --repo "$repo" --commit master 2> "$TEST_TMP/err") || fail "create --repo: $(cat "$TEST_TMP/err")"
        MY_SANDBOXES="$MY_SANDBOXES $id2"
        assert_eq "" "$(cat "$TEST_TMP/err")" "stderr of create --repo into a file"
        "$NSBOX" snapshot "$id" "$snap" > /dev/null 2> "$TEST_TMP/err" || fail "snapshot: $(cat "$TEST_TMP/err")"
        assert_eq "" "$(cat "$TEST_TMP/err")" "stderr of snapshot into a file"
        assert_status 0 "$NSBOX" snapshot rm "$snap"
        assert_status 0 "$NSBOX" rm "$id" "$id2"
}

# ---- cp -r ---------------------------------------------------------------------------------

make_tree() { # DIR: a file, an executable, a private directory, links absolute and relative
        mkdir -p "$1/sub/private" && echo hello > "$1/a.txt" && printf '#!/bin/sh\necho ran\n' > "$1/sub/run.sh" &&
                chmod 755 "$1/sub/run.sh" && chmod 700 "$1/sub/private" && ln -s /etc/passwd "$1/abs" &&
                ln -s a.txt "$1/rel" && head -c 300000 /dev/urandom > "$1/sub/private/blob"
}

test_cp_r_copies_a_directory_both_ways_keeping_modes_and_links() {
        local id
        new_sandbox id
        make_tree "$TEST_TMP/src"
        assert_status 0 "$NSBOX" cp -r "$TEST_TMP/src" "$id:/tmp/tree"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'cd /tmp/tree && cat a.txt && sub/run.sh && readlink abs rel && stat -c %a sub/private sub/run.sh'
        assert_eq "$(printf 'hello\nran\n/etc/passwd\na.txt\n700\n755')" "$OUT" "the tree in the sandbox"
        # into an existing directory: under SRC's name
        assert_status 0 "$NSBOX" cp -R "$TEST_TMP/src" "$id:/tmp/tree"
        assert_status 0 "$NSBOX" exec "$id" -- cat /tmp/tree/src/a.txt
        assert_eq hello "$OUT"
        # and back out, the same bytes, modes and links
        assert_status 0 "$NSBOX" cp -r "$id:/tmp/tree" "$TEST_TMP/back"
        assert_eq "$(readlink "$TEST_TMP/back/abs") $(readlink "$TEST_TMP/back/rel")" "/etc/passwd a.txt" "links kept as links"
        assert_eq "$(stat -c %a "$TEST_TMP/back/sub/private") $(stat -c %a "$TEST_TMP/back/sub/run.sh")" "700 755" "modes"
        cmp "$TEST_TMP/src/sub/private/blob" "$TEST_TMP/back/sub/private/blob" || fail "the blob differs after the round trip"
        assert_eq hello "$(cat "$TEST_TMP/back/src/a.txt")"
        mkdir "$TEST_TMP/into"
        assert_status 0 "$NSBOX" cp --recursive "$id:/tmp/tree/sub" "$TEST_TMP/into"
        assert_eq ran "$("$TEST_TMP/into/sub/run.sh")"
        # an existing target is refused, never merged into
        assert_status 125 "$NSBOX" cp -r "$id:/tmp/tree/sub" "$TEST_TMP/into"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "exists"
        assert_status 125 "$NSBOX" cp -r "$TEST_TMP/src" "$id:/tmp/tree"
        assert_contains "$OUT" "exists"
        ls "$TEST_TMP" | grep -q nsbox-cp && fail "a temporary directory was left: $(ls "$TEST_TMP")"
        true
}

test_cp_of_a_directory_without_r_says_use_r() {
        local id
        new_sandbox id
        mkdir "$TEST_TMP/d"
        assert_status 125 "$NSBOX" cp "$TEST_TMP/d" "$id:/tmp/d"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "is a directory (use -r)"
        assert_status 125 "$NSBOX" cp "$id:/tmp" "$TEST_TMP/t"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "is a directory (use -r)"
        [ -e "$TEST_TMP/t" ] && fail "cp made $TEST_TMP/t"
        true
}

test_cp_r_is_bounded_and_leaves_nothing_when_over() {
        local id
        new_sandbox id
        make_tree "$TEST_TMP/src"
        assert_status 125 "$NSBOX" cp -r --max-size 64K "$TEST_TMP/src" "$id:/tmp/big"
        assert_contains "$OUT" "larger than 65536 bytes"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'ls -a /tmp | grep -c "big" || true'
        assert_eq 0 "$OUT" "nothing left in the sandbox"
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'mkdir -p /tmp/big && head -c 200000 /dev/zero > /tmp/big/z'
        assert_status 125 "$NSBOX" cp -r --max-size 64K "$id:/tmp/big" "$TEST_TMP/big"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "larger than 65536 bytes"
        [ -z "$(ls "$TEST_TMP" | grep big)" ] || fail "left on the host: $(ls "$TEST_TMP")"
        assert_status 125 "$NSBOX" cp -r --max-size lots "$id:/tmp/big" "$TEST_TMP/big"
        assert_one_line_error "$OUT"
        # a file tar cannot read inside fails the copy out, and leaves nothing either
        assert_status 0 "$NSBOX" exec "$id" -- sh -c 'mkdir /tmp/locked && echo x > /tmp/locked/f && chmod 000 /tmp/locked/f'
        assert_status 125 "$NSBOX" cp -r "$id:/tmp/locked" "$TEST_TMP/locked"
        assert_contains "$OUT" "could not read '/tmp/locked'"
        [ -z "$(ls "$TEST_TMP" | grep locked)" ] || fail "left on the host: $(ls "$TEST_TMP")"
}

# A sandbox whose tar (first in PATH: /usr/local/bin, bound read-only) sends a crafted stream
test_cp_r_out_refuses_names_that_leave_the_target() {
        local id bad
        mkdir -p "$TEST_TMP/bin" "$TEST_TMP/victim" "$TEST_TMP/tars"
        chmod 755 "$TEST_TMP" "$TEST_TMP/bin" "$TEST_TMP/tars"
        printf '#!/bin/sh\nexec cat "/tars/$(cat /tmp/which)"\n' > "$TEST_TMP/bin/tar"
        chmod 755 "$TEST_TMP/bin/tar"
        python3 - "$TEST_TMP/tars" "$TEST_TMP/victim" <<'PY' || fail "making the tars"
import io, sys, tarfile
d, victim = sys.argv[1], sys.argv[2]
def tar(name, *entries):
    with tarfile.open(f"{d}/{name}", "w", format=tarfile.GNU_FORMAT) as t:
        for e in entries:
            i = tarfile.TarInfo(e[0]); i.mode = 0o644
            if len(e) > 2:
                i.type, i.linkname = tarfile.SYMTYPE, e[2]
                t.addfile(i)
            else:
                i.size = len(e[1]); t.addfile(i, io.BytesIO(e[1]))
    import os; os.chmod(f"{d}/{name}", 0o644)
tar("dotdot", ("ok", b"x"), ("../escaped", b"x"))
tar("absolute", ("ok", b"x"), (victim + "/abs", b"x"))
tar("through-link", ("ok", b"x"), ("lnk", b"", victim), ("lnk/pwned", b"x"))
tar("long", ("ok", b"x"), ("a" * 150 + "/../../escaped", b"x"))
PY
        new_sandbox id --bind "$TEST_TMP/bin:/usr/local/bin" --bind "$TEST_TMP/tars:/tars"
        assert_status 0 "$NSBOX" exec "$id" -- mkdir /tmp/d
        for bad in dotdot absolute through-link long; do
                assert_status 0 "$NSBOX" exec "$id" -- sh -c "echo $bad > /tmp/which"
                assert_status 125 "$NSBOX" cp -r "$id:/tmp/d" "$TEST_TMP/out-$bad"
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "refused" "$bad"
                [ -e "$TEST_TMP/out-$bad" ] && fail "$bad: the target was made"
                [ -z "$(ls "$TEST_TMP/victim")" ] || fail "$bad: wrote into the victim: $(ls "$TEST_TMP/victim")"
                [ -e "$TEST_TMP/escaped" ] && fail "$bad: escaped"
                ls "$TEST_TMP" | grep -q nsbox-cp && fail "$bad: a temporary directory was left"
        done
        true
}

run_tests
