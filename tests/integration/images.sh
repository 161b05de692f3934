#!/usr/bin/env bash
# Images (nsbox(1), IMAGES): nsbox image import|ls|inspect|rm, run and create --image, on
# images built here offline (tests/integration/mkimage.py: busybox, an /etc/os-release, a
# whiteout and an opaque directory in a second layer), as an OCI layout, a tar of one and a
# docker-archive; and hostile archives, each refused in one line with the store unchanged.
# Runs as root and as an unprivileged user.
# shellcheck disable=SC2016
. "$(dirname "$0")/../lib.sh"

SESSION_DIR=$(mktemp -d /tmp/nsbox-img.XXXXXX) || exit 1
export NSBOX_SOCKET="$SESSION_DIR/d.sock"
export NSBOX_STORE="$SESSION_DIR/store"
MK="$NSBOX_SRC/tests/integration/mkimage.py"
command -v busybox > /dev/null || { echo "busybox is needed (apt-get install busybox-static)" >&2; exit 1; }

jget() {
        python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(v if isinstance(v, str) else json.dumps(v))' "$1"
}

MY_SANDBOXES=""
MY_IMAGES=""
cleanup_test() {
        # shellcheck disable=SC2086
        [ -z "$MY_SANDBOXES" ] || "$NSBOX" rm -f $MY_SANDBOXES > /dev/null 2>&1
        local n
        for n in $MY_IMAGES; do "$NSBOX" image rm "$n" > /dev/null 2>&1; done
}
arm_cleanup() { trap cleanup_test EXIT; } # in each test's own subshell

# Import KIND (mkimage.py) as NAME (removed when the test ends).
import_image() { # KIND NAME
        local n=$2
        local src="$TEST_TMP/$1-${n//[:\/]/_}"
        python3 "$MK" "$1" "$src" "$2" || fail "mkimage.py $1"
        MY_IMAGES="$MY_IMAGES $2"
        arm_cleanup
        assert_status 0 "$NSBOX" image import "$src"
        assert_eq "$2" "$OUT" "the name nsbox image import printed"
}

store_state() { (cd "$NSBOX_STORE" && find images layers tmp -mindepth 1 -maxdepth 1 -printf '%p\n' 2> /dev/null | LC_ALL=C sort); }
layer_count() { find "$NSBOX_STORE/layers" -mindepth 1 -maxdepth 1 | grep -c .; }

test_an_oci_layout_is_imported_listed_inspected_and_run() {
        import_image oci test/busybox:1
        assert_status 0 "$NSBOX" image ls
        assert_contains "$OUT" "test/busybox:1"
        assert_status 0 "$NSBOX" image ls --json
        assert_eq 2 "$(echo "$OUT" | jget '[len(i["layers"]) for i in d if i["name"] == "test/busybox:1"][0]')" "layers"
        assert_status 0 "$NSBOX" image inspect test/busybox:1
        assert_eq '["cat", "/etc/os-release"]' "$(echo "$OUT" | jget 'd["config"]["Cmd"]')" "Cmd"
        assert_eq "oci" "$(echo "$OUT" | jget 'd["format"]')" "format"
        assert_status 0 "$NSBOX" run --image test/busybox:1 -- cat /etc/os-release
        assert_contains "$OUT" 'PRETTY_NAME="nsbox test image"'
        # the host's /usr is not there: the image is the whole root
        assert_status 0 "$NSBOX" run --image test/busybox:1 -- sh -c 'ls /usr 2>&1; ls /'
        assert_not_contains "$OUT" "python3"
        assert_contains "$OUT" "No such file"
        # gc keeps what an image names
        assert_status 0 "$NSBOX" gc
        assert_status 0 "$NSBOX" run --image test/busybox:1 -- cat /etc/os-release
        assert_contains "$OUT" "nsboxtest"
}

# A snapshot of a sandbox on an image starts sandboxes on it, and keeps the image's layers.
test_a_snapshot_of_an_image_sandbox_outlives_the_image() {
        import_image oci snapbase:1
        local sid fork
        sid=$("$NSBOX" create --image snapbase:1 2>&1) || fail "create --image: $sid"
        MY_SANDBOXES="$MY_SANDBOXES $sid"
        arm_cleanup
        assert_status 0 "$NSBOX" exec "$sid" -- sh -c 'echo mine > /srv/f'
        assert_status 0 "$NSBOX" snapshot "$sid" img-snap
        assert_status 0 "$NSBOX" rm -f "$sid"
        assert_status 0 "$NSBOX" image rm snapbase:1
        fork=$("$NSBOX" create --from img-snap 2>&1) || fail "create --from: $fork"
        MY_SANDBOXES="$MY_SANDBOXES $fork"
        assert_status 0 "$NSBOX" exec "$fork" -- sh -c 'cat /srv/f /etc/os-release; ls /etc/gone 2>&1; true'
        assert_contains "$OUT" "mine"
        assert_contains "$OUT" "nsboxtest"
        assert_contains "$OUT" "No such file"
        assert_status 0 "$NSBOX" rm -f "$fork"
        assert_status 0 "$NSBOX" snapshot rm img-snap
}

test_a_whiteout_deletes_and_an_opaque_directory_hides_the_lower_layer() {
        import_image oci wh:1
        assert_status 0 "$NSBOX" run --image wh:1 -- sh -c 'ls /etc/gone 2>&1; echo; ls /opt/dir'
        assert_contains "$OUT" "No such file"
        assert_eq "c" "$(printf '%s\n' "$OUT" | tail -n 1)" "/opt/dir (opaque in the upper layer)"
}

test_the_config_gives_env_workdir_and_the_default_command() {
        import_image oci cfg:1
        assert_status 0 "$NSBOX" run --image cfg:1
        assert_contains "$OUT" "ID=nsboxtest" "the image's Cmd"
        assert_status 0 "$NSBOX" run --image cfg:1 -e OVERRIDE=mine -- sh -c 'pwd; echo "$IMGVAR $OVERRIDE"'
        assert_eq "/srv
from-image mine" "$OUT" "WorkingDir, Env under -e"
        assert_status 0 "$NSBOX" run --image cfg:1 --workdir /workspace -- pwd
        assert_eq "/workspace" "$OUT" "--workdir over WorkingDir"
}

test_a_tar_of_a_layout_and_a_docker_archive_are_imported() {
        import_image oci-tar tarred:1
        assert_status 0 "$NSBOX" run --image tarred:1 -- cat /etc/os-release
        assert_contains "$OUT" "nsboxtest"
        import_image docker docker.io/library/dock:2
        assert_status 0 "$NSBOX" image inspect docker.io/library/dock:2
        assert_eq "docker-archive" "$(echo "$OUT" | jget 'd["format"]')" "format"
        assert_status 0 "$NSBOX" run --image docker.io/library/dock:2 -- sh -c 'cat /etc/os-release; ls /etc/gone 2>&1; true'
        assert_contains "$OUT" "nsboxtest"
        assert_contains "$OUT" "No such file"
        assert_eq 0 "$(find "$NSBOX_STORE/tmp" -mindepth 1 | grep -c .)" "tmp/ after the imports"
}

test_two_images_sharing_a_base_layer_store_it_once() {
        local before; before=$(layer_count)
        import_image oci share-a:1
        local one; one=$(layer_count)
        import_image shared share-b:1
        assert_eq $((one + 1)) "$(layer_count)" "layers after the second image (its base is the first's)"
        assert_status 0 "$NSBOX" run --image share-b:1 -- cat /etc/second
        assert_contains "$OUT" "second image"
        local base_a base_b
        base_a=$("$NSBOX" image inspect share-a:1 | jget 'd["layers"][-1]')
        base_b=$("$NSBOX" image inspect share-b:1 | jget 'd["layers"][-1]')
        assert_eq "$base_a" "$base_b" "the base layer of both"
        # removing one keeps the shared layer for the other
        assert_status 0 "$NSBOX" image rm share-a:1
        [ -d "$NSBOX_STORE/layers/$base_b" ] || fail "the shared base layer went with share-a:1"
        assert_status 0 "$NSBOX" run --image share-b:1 -- cat /etc/os-release
        assert_status 0 "$NSBOX" image rm share-b:1
        assert_eq "$before" "$(layer_count)" "layers after both are removed"
}

test_an_image_in_use_is_not_removed() {
        import_image oci busy:1
        local sid
        sid=$("$NSBOX" create --image busy:1 2>&1) || fail "create --image: $sid"
        MY_SANDBOXES="$MY_SANDBOXES $sid"
        arm_cleanup
        assert_status 0 "$NSBOX" exec "$sid" -- sh -c 'pwd; echo $IMGVAR; cat /etc/os-release'
        assert_contains "$OUT" "/srv"
        assert_contains "$OUT" "from-image"
        assert_status 125 "$NSBOX" image rm busy:1
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "in use"
        assert_eq true "$("$NSBOX" image ls --json | jget '[i["in_use"] for i in d if i["name"] == "busy:1"][0]')" "in_use"
        assert_status 0 "$NSBOX" rm -f "$sid"
        assert_status 0 "$NSBOX" image rm busy:1
        assert_status 125 "$NSBOX" image inspect busy:1
}

test_bad_names_and_unknown_images_are_one_line_errors() {
        local n
        for n in 'a..b' '/abs' 'a//b' 'trailing/' '-x' 'sp ace'; do
                assert_status 125 "$NSBOX" run --image "$n" -- true
                assert_one_line_error "$OUT"
        done
        assert_status 125 "$NSBOX" run --image no/such:image -- true
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "no image 'no/such:image'"
        assert_status 125 "$NSBOX" image rm no/such:image
        assert_one_line_error "$OUT"
        python3 "$MK" oci "$TEST_TMP/dup" dup:1 || fail mkimage
        MY_IMAGES="$MY_IMAGES dup:1"; arm_cleanup
        assert_status 0 "$NSBOX" image import "$TEST_TMP/dup"
        assert_status 125 "$NSBOX" image import "$TEST_TMP/dup"
        assert_one_line_error "$OUT"
        assert_contains "$OUT" "exists"
        assert_status 125 "$NSBOX" image import "$TEST_TMP/no-such-dir" x:1
        assert_one_line_error "$OUT"
}

# Each hostile archive: refused in one line, the store as it was, nothing written outside.
test_hostile_archives_are_refused_and_leave_nothing() {
        local kind before
        rm -f /tmp/pwned
        for kind in abs dotdot symlink-write symlink-swap hardlink-out digest corrupt-gzip many; do
                python3 "$MK" "$kind" "$TEST_TMP/h-$kind" || fail "mkimage.py $kind"
                before=$(store_state)
                assert_status 125 env NSBOX_IMAGE_MAX_ENTRIES=50 "$NSBOX" image import "$TEST_TMP/h-$kind" "h-$kind"
                assert_one_line_error "$OUT"
                assert_eq "$before" "$(store_state)" "the store after $kind"
        done
        [ ! -e /tmp/pwned ] || fail "a file was written through a symlink"
        assert_status 0 "$NSBOX" image ls --json
        assert_eq "[]" "$(echo "$OUT" | jget '[i["name"] for i in d if i["name"].startswith("h-")]')" "hostile images listed"
}

# A device node: root's import skips it and says so (a user namespace could not open it anyway);
# a user's is refused as hostile, the store unchanged.
test_device_nodes_are_skipped_for_root_and_refused_for_a_user() {
        python3 "$MK" device "$TEST_TMP/dev" || fail mkimage
        if [ "$TEST_AS" = user ]; then
                local before
                before=$(store_state)
                assert_status 125 "$NSBOX" image import "$TEST_TMP/dev" dev:1
                assert_one_line_error "$OUT"
                assert_contains "$OUT" "device"
                assert_eq "$before" "$(store_state)" "the store after a device node"
                return
        fi
        MY_IMAGES="$MY_IMAGES dev:1"; arm_cleanup
        assert_status 0 "$NSBOX" image import "$TEST_TMP/dev" dev:1
        assert_contains "$OUT" "device node(s) skipped"
        assert_status 0 "$NSBOX" run --image dev:1 -- sh -c 'ls /null 2>&1; true'
        assert_contains "$OUT" "No such file"
}

# A Debian image (apt and dpkg as this host installed them) run by a root policy's user with
# --net nat: apt-get installs a package from Debian's archive, through the sandbox's own network,
# into the sandbox's writable layer; the image's users (_apt) are in its /etc/passwd.  A user's
# sandbox maps one id, so apt cannot drop to _apt there: APT::Sandbox::User=root, as documented.
test_root_user_installs_a_debian_package_with_apt_get() {
        command -v apt-get > /dev/null && dpkg -s apt > /dev/null 2>&1 || fail "this test needs a Debian host (apt, dpkg)"
        import_image debian deb:apt
        local apt="apt-get"
        [ "$TEST_AS" = root ] || apt="apt-get -o APT::Sandbox::User=root"
        assert_status 0 "$NSBOX" run --image deb:apt --policy root --net nat -- sh -c \
                "id -u; grep -c '^_apt:' /etc/passwd; ls /var/lib/apt/lists/*_Packages* > /dev/null 2>&1 || $apt update -qq
                 $apt install -y -q hello > /tmp/apt.log 2>&1 || { tail -n 5 /tmp/apt.log; exit 1; }
                 hello; dpkg -s hello | grep '^Status'; stat -c %U /usr/bin/hello"
        assert_eq "0
1
Hello, world!
Status: install ok installed
root" "$OUT" "uid, the image's _apt user, apt-get install hello, its owner"
        [ ! -e /usr/bin/hello ] || dpkg -s hello > /dev/null 2>&1 || fail "hello appeared on the host"
        assert_status 0 "$NSBOX" run --image deb:apt --policy root -- sh -c 'command -v hello || echo gone'
        assert_eq gone "$OUT" "a new sandbox of the image"
}

# A template of nsboxd.json that names an image: its pool starts on it, and a create takes one.
test_template_pool_on_an_image() {
        import_image oci tpl:1
        local d="$SESSION_DIR/tpl" sid i
        mkdir -p "$d" && chmod 0711 "$d"
        printf '{"templates": {"img": {"create": {"image": "tpl:1"}, "pool": 1}}}\n' > "$d/config.json"
        NSBOX_SOCKET="$d/d.sock" "$(dirname "$NSBOX")/nsboxd" --config "$d/config.json" --socket "$d/d.sock" > "$d/log" 2>&1 &
        TPL_DAEMON=$! # global: the trap runs after this function's locals are gone
        trap 'kill -TERM $TPL_DAEMON 2>/dev/null; wait $TPL_DAEMON 2>/dev/null; cleanup_test' EXIT
        for i in $(seq 100); do [ -S "$d/d.sock" ] && break; sleep 0.1; done
        sid=$(NSBOX_SOCKET="$d/d.sock" "$NSBOX" create --template img 2>&1) || fail "create --template img: $sid $(tail -n 3 "$d/log")"
        assert_status 0 env NSBOX_SOCKET="$d/d.sock" "$NSBOX" exec "$sid" -- sh -c 'cat /etc/os-release; pwd; echo $IMGVAR'
        assert_eq 'PRETTY_NAME="nsbox test image"
ID=nsboxtest
/srv
from-image' "$OUT" "a pooled sandbox of an image template"
        assert_status 125 "$NSBOX" image rm tpl:1
        assert_contains "$OUT" "in use"
        NSBOX_SOCKET="$d/d.sock" "$NSBOX" rm -f "$sid" > /dev/null
}

# Last: nothing left behind.
test_z_nothing_is_left() {
        "$NSBOX" daemon stop > /dev/null 2>&1
        assert_eq "" "$(ls -A "$NSBOX_STORE/images")" "image records left"
        assert_eq "" "$(ls -A "$NSBOX_STORE/tmp")" "tmp/ left"
        assert_status 0 "$NSBOX" gc --json
        assert_eq "" "$(ls -A "$NSBOX_STORE/layers")" "layers left after gc"
}

run_tests
"$NSBOX" daemon stop > /dev/null 2>&1
rm -rf "$SESSION_DIR"
