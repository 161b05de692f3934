#!/usr/bin/env bash
# contrib/kubernetes, offline: there is no cluster here, so every resource is validated against
# the Kubernetes schemas of npm's kubernetes-models (pinned in tests/kubernetes, installed once
# into a cache with npm ci), strictly (a field the schema lacks fails, as with kubectl
# --validate=strict); the router's haproxy.cfg is checked with haproxy -c and then run against a
# stand-in cluster on loopback (tests/kubernetes/router.py).  That the validation can fail is a
# test too.  Needs no root, no nsboxd, node and haproxy (./quickstart.sh --deps).
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/../lib.sh"
: "${NSBOX_SRC:?NSBOX_SRC must point at the source tree}"
K8S=$NSBOX_SRC/contrib/kubernetes

# Runs tests/kubernetes/validate.mjs with its pinned packages; its output goes to $OUT.
validate() { # validate.mjs args...
        command -v node > /dev/null || fail "node is missing (./quickstart.sh --deps)"
        command -v npm > /dev/null || fail "npm is missing (./quickstart.sh --deps)"
        local dir
        dir=$(npm_cache_dir kubernetes node_modules/.package-lock.json "$NSBOX_SRC/tests/kubernetes" 2> "$TEST_TMP/npm.err") ||
                fail "npm ci of tests/kubernetes failed: $(tail -n 5 "$TEST_TMP/npm.err")"
        # the script next to its node_modules, so that its imports resolve there
        { mkdir -p "$TEST_TMP/validate" && cp "$NSBOX_SRC/tests/kubernetes/validate.mjs" "$TEST_TMP/validate/" &&
                ln -sfn "$dir/node_modules" "$TEST_TMP/validate/node_modules"; } || fail "cannot lay out $TEST_TMP/validate"
        OUT=$(node "$TEST_TMP/validate/validate.mjs" "$@" 2>&1)
}

need_haproxy() {
        command -v haproxy > /dev/null || PATH=$PATH:/usr/sbin command -v haproxy > /dev/null ||
                fail "haproxy is missing (apt-get install haproxy, or ./quickstart.sh --deps)"
        export PATH=$PATH:/usr/sbin
}

router_cfg() { # OUT-FILE: the haproxy.cfg of haproxy-config.yaml
        validate --get "$K8S/haproxy-config.yaml" haproxy.cfg || fail "no haproxy.cfg: $OUT"
        printf '%s\n' "$OUT" > "$1"
}

test_every_manifest_matches_the_kubernetes_schemas() {
        local f n
        validate "$K8S"/*.yaml || fail "validation failed: $OUT"
        printf '%s\n' "$OUT"
        assert_not_contains "$OUT" "FAIL" "validation"
        for f in "$K8S"/*.yaml; do
                assert_contains "$OUT" "ok $(basename "$f"): " "validation of $(basename "$f")"
        done
        for n in DaemonSet/nsboxd Service/nsboxd Deployment/nsbox-router ConfigMap/nsbox-router-config Service/nsbox-router \
                Deployment/redis Service/redis ConfigMap/nsboxd-config Secret/nsbox-api-keys Namespace/nsbox Kustomization; do
                assert_contains "$OUT" ": $n" "the resources validated"
        done
}

test_a_wrong_field_or_value_is_reported() {
        validate "$K8S"/*.yaml || fail "the shipped manifests do not validate: $OUT"
        { mkdir -p broken && cp "$K8S"/*.yaml broken/; } || fail "cannot copy $K8S"
        # a misspelt field (the schemas allow any; the strict check does not), a wrong type
        sed -i 's/^\( *\)procMount: Unmasked/\1procMonut: Unmasked/; s/containerPort: 49983/containerPort: "49983"/' broken/nsboxd-daemonset.yaml
        # a manifest that the kustomization does not list
        cp broken/redis.yaml broken/extra.yaml
        ! validate broken/*.yaml || fail "a broken manifest validated: $OUT"
        printf '%s\n' "$OUT"
        assert_contains "$OUT" "FAIL nsboxd-daemonset.yaml: DaemonSet/nsboxd: "
        assert_contains "$OUT" "unknown field: spec.template.spec.containers[0].securityContext.procMonut"
        assert_contains "$OUT" "containers/0/ports/1/containerPort must be integer"
        assert_contains "$(validate broken/kustomization.yaml; echo "$OUT")" "FAIL kustomization.yaml: Kustomization: manifests not in resources: extra.yaml"
        assert_contains "$(printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{image: i}]}\n' > pod.yaml
                validate pod.yaml; echo "$OUT")" "FAIL pod.yaml: Pod/x: data/spec/containers/0 must have required property name" "a container without a name"
}

test_router_configuration_passes_haproxy_check() {
        need_haproxy
        router_cfg haproxy.cfg
        assert_status 0 haproxy -c -f haproxy.cfg
        printf '%s\n' "$OUT"
        assert_contains "$OUT" "Configuration file is valid"
        # and it is the 2.6 that Debian 12 ships, the version the configuration is written for
        assert_contains "$(haproxy -v)" "version 2.6."
}

test_a_broken_router_configuration_is_reported() {
        need_haproxy
        router_cfg haproxy.cfg
        sed '0,/,regsub(/s//,regsubb(/' haproxy.cfg > bad.cfg
        assert_status 1 haproxy -c -f bad.cfg
        assert_contains "$OUT" "regsubb"
        sed 's/do-resolve(txn.ip,kube,ipv4)/do-resolve(txn.ip,nowhere,ipv4)/' haproxy.cfg > bad.cfg
        assert_status 1 haproxy -c -f bad.cfg
        assert_contains "$OUT" "nowhere"
}

# The router, for real, against two stand-in nodes and a stand-in CoreDNS on loopback.
test_router_sends_each_request_to_the_node_in_its_id() {
        need_haproxy
        command -v python3 > /dev/null || fail "python3 is missing"
        router_cfg haproxy.cfg
        mkdir -p run
        OUT=$(timeout -k 5 120 python3 "$NSBOX_SRC/tests/kubernetes/router.py" haproxy.cfg run 2>&1)
        local st=$?
        printf '%s\n' "$OUT"
        [ $st = 0 ] || fail "router checks failed ($st): $(printf '%s\n' "$OUT" | grep -v '^ok'); $(tail -n 5 run/haproxy.log)"
        assert_eq 13 "$(printf '%s\n' "$OUT" | grep -c '^ok ')" "router checks passed"
}

# The ports, names and files the manifests share agree with each other.
test_manifests_agree_with_each_other() {
        local cfg json
        router_cfg haproxy.cfg
        validate --get "$K8S/nsboxd-config.yaml" nsboxd.json || fail "no nsboxd.json: $OUT"
        json=$OUT
        printf '%s' "$json" | python3 -c 'import json, sys; json.load(sys.stdin)' || fail "nsboxd.json is not JSON: $json"
        cfg=$(cat haproxy.cfg)
        assert_contains "$json" '"listen": "0.0.0.0:49982"'
        assert_contains "$json" '"agent_check": "0.0.0.0:49983"'
        assert_contains "$cfg" "server-template nsbox 64 nsboxd.nsbox.svc.cluster.local:49982"
        assert_contains "$cfg" "agent-port 49983"
        assert_contains "$cfg" "set-dst-port int(49982)"
        assert_contains "$cfg" "%[var(txn.node)].nsboxd.nsbox.svc.cluster.local"
        assert_contains "$json" '"redis": "redis.nsbox.svc.cluster.local:6379"'
        assert_contains "$json" '"keys": "/etc/nsbox/api-keys.json"'
        assert_contains "$(cat "$K8S/nsboxd-daemonset.yaml")" "mountPath: /etc/nsbox/api-keys.json"
        # shellcheck disable=SC2016
        assert_contains "$(cat "$K8S/nsboxd-daemonset.yaml")" 'exec nsboxd --node "$(echo "$POD_IP" | tr . -)" --config /etc/nsbox/nsboxd.json'
        assert_contains "$(cat "$K8S/nsboxd-daemonset.yaml")" "mountPath: /etc/nsbox/nsboxd.json"
}

# nsboxd.json as nsboxd itself reads it (--check-config, which refuses an unknown key), cluster
# settings included; and the node name the DaemonSet's wrapper makes of a pod IP is one nsboxd takes.
test_nsboxd_accepts_its_configuration() {
        [ -x "$NSBOX_BUILD/nsboxd" ] || fail "no $NSBOX_BUILD/nsboxd (make)"
        validate --get "$K8S/nsboxd-config.yaml" nsboxd.json || fail "no nsboxd.json: $OUT"
        printf '%s\n' "$OUT" > nsboxd.json
        OUT=$(cd / && "$NSBOX_BUILD/nsboxd" --check-config --config "$TEST_TMP/nsboxd.json" 2>&1) ||
                fail "nsboxd --check-config of the ConfigMap's nsboxd.json: $OUT"
        assert_contains "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cluster"])' nsboxd.json)" "redis" "the catalog's setting"
        OUT=$(cd / && "$NSBOX_BUILD/nsboxd" --node "$(echo 10.244.1.23 | tr . -)" --check-config --config "$TEST_TMP/nsboxd.json" 2>&1) ||
                fail "nsboxd --node 10-244-1-23: $OUT"
}

test_every_file_says_how_to_use_it() {
        local f
        for f in "$K8S"/*; do
                head -n 1 "$f" | grep -q '^# ' || fail "$(basename "$f") does not start with a comment"
                sed -n '/^[^#]/q;p' "$f" | grep -q 'Usage' || fail "$(basename "$f")'s header does not say how to use it"
        done
        assert_contains "$(cat "$K8S/nsboxd-daemonset.yaml")" "NOT TESTED"
        assert_contains "$(cat "$K8S/Containerfile")" "NOT TESTED"
}

run_tests
