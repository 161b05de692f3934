#!/usr/bin/env python3
"""Runs the router's haproxy.cfg (contrib/kubernetes/haproxy-config.yaml) for real against a
cluster made of loopback addresses: a DNS server that answers as CoreDNS does for the headless
Service nsboxd, and two fake nodes, 127-0-0-2 and 127-0-0-3, each an HTTP server that says who
it is and an agent-check port.  Node 127-0-0-3 answers "drain", so every create must go to
127-0-0-2.  Prints one line per check, "ok NAME" or "FAIL NAME: why"; exit status 1 on any FAIL.

    router.py HAPROXY_CFG WORKDIR
"""
import http.client
import http.server
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time

NODES = {"127-0-0-2": "up 100%\n", "127-0-0-3": "drain\n"}
SERVICE = "nsboxd.nsbox.svc.cluster.local"
SBX = "0123456789abcdef0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dns_answer(query):
    """CoreDNS for the headless Service: the Service's name lists every pod, DASHED-IP.SERVICE
    names one; anything else is NXDOMAIN.  A queries only; other types get no answer."""
    (qid,) = struct.unpack(">H", query[:2])
    labels, i = [], 12
    while query[i]:
        labels.append(query[i + 1:i + 1 + query[i]].decode("ascii", "replace").lower())
        i += 1 + query[i]
    qtype, _ = struct.unpack(">HH", query[i + 1:i + 5])
    question = query[12:i + 5]
    name = ".".join(labels)
    if name == SERVICE:
        addrs = [n.replace("-", ".") for n in NODES]
    elif name.endswith("." + SERVICE) and name[: -len(SERVICE) - 1] in NODES:
        addrs = [name[: -len(SERVICE) - 1].replace("-", ".")]
    else:
        return struct.pack(">HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
    answers = b""
    if qtype == 1:
        for a in addrs:
            answers += struct.pack(">HHHIH", 0xC00C, 1, 1, 5, 4) + socket.inet_aton(a)
    count = len(addrs) if qtype == 1 else 0
    return struct.pack(">HHHHHH", qid, 0x8180, 1, count, 0, 0) + question + answers


def serve_dns(sock):
    while True:
        data, peer = sock.recvfrom(4096)
        try:
            sock.sendto(dns_answer(data), peer)
        except (IndexError, struct.error):
            pass


class Node(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        node = self.server.server_address[0].replace(".", "-")
        if self.path.endswith("/stream"):
            # a stream: the first chunk must reach the client before the second is written
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"first\n", b"second\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
                time.sleep(1.5)
            self.wfile.write(b"0\r\n\r\n")
            return
        body = json.dumps({"node": node, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = answer

    def log_message(self, *args):
        pass


AGENT_ASKED = {n: threading.Event() for n in NODES}


class Agent(socketserver.BaseRequestHandler):
    def handle(self):
        node = self.server.server_address[0].replace(".", "-")
        self.request.sendall(NODES[node].encode())
        AGENT_ASKED[node].set()


def start(server):
    server.daemon_threads = True
    # the router's health checks connect and reset: not worth a traceback
    server.handle_error = lambda request, address: None
    threading.Thread(target=server.serve_forever, daemon=True).start()


def request(port, method, path, headers=None, timeout=10, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body if body is not None else b"{}" if method == "POST" else None, headers=headers or {})
    r = c.getresponse()
    return r.status, r.getheader("Content-Type"), r.read().decode()


def main(cfg_path, workdir):
    api, agent, hport, dport = free_port(), free_port(), free_port(), free_port()
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(("127.0.0.1", dport))
    threading.Thread(target=serve_dns, args=(dns,), daemon=True).start()
    socketserver.TCPServer.allow_reuse_address = True
    for n in NODES:
        addr = n.replace("-", ".")
        start(http.server.ThreadingHTTPServer((addr, api), Node))
        start(socketserver.ThreadingTCPServer((addr, agent), Agent))

    # the shipped configuration, with this test's ports and DNS server in place of the cluster's
    cfg = open(cfg_path).read()
    for old, new in (("49982", str(api)), ("49983", str(agent)), ("bind :8080", "bind 127.0.0.1:%d" % hport),
                     ("parse-resolv-conf", "nameserver fake 127.0.0.1:%d" % dport),
                     # a pod's file limit allows 20000 connections, a test user's may not
                     ("maxconn 20000", "maxconn 1000")):
        if old not in cfg:
            print("FAIL config: no '%s' in %s" % (old, cfg_path))
            return 1
        cfg = cfg.replace(old, new)
    path = os.path.join(workdir, "haproxy.cfg")
    with open(path, "w") as f:
        f.write(cfg)
    log = open(os.path.join(workdir, "haproxy.log"), "w")
    proc = subprocess.Popen(["haproxy", "-db", "-f", path], stdout=log, stderr=subprocess.STDOUT)
    try:
        return checks(hport, proc)
    finally:
        proc.kill()
        proc.wait()


def checks(port, proc):
    bad = 0

    def check(name, ok, why):
        nonlocal bad
        print("ok %s" % name if ok else "FAIL %s: %s" % (name, why))
        bad += not ok

    # the servers of server-template come from DNS and their checks: wait until a create lands
    deadline, got = time.time() + 30, None
    while time.time() < deadline and proc.poll() is None:
        try:
            got = request(port, "POST", "/sandboxes")
            if got[0] == 200:
                break
        except OSError as e:
            got = ("error", str(e))
        time.sleep(0.5)
    check("router_starts_and_finds_nodes", got and got[0] == 200, "POST /sandboxes: %s (haproxy.log)" % (got,))
    if bad:
        return 1
    # both nodes have said their state to the agent check (a node is up by its TCP check first)
    for n, asked in AGENT_ASKED.items():
        if not asked.wait(max(deadline - time.time(), 0)):
            check("agent_checks_reach_the_nodes", False, "no agent check of %s" % n)
            return 1
    time.sleep(0.5)

    nodes = [json.loads(request(port, "POST", p)[2])["node"] for p in ["/sandboxes", "/v2/sandboxes"] * 10]
    check("creates_skip_a_draining_node", set(nodes) == {"127-0-0-2"}, "creates went to %s" % nodes)

    for name, method, path, headers, node in [
        ("header_names_the_node", "GET", "/health", {"E2b-Sandbox-Id": SBX + "-127-0-0-3"}, "127-0-0-3"),
        ("path_names_the_node", "POST", "/sandboxes/%s-127-0-0-3/pause" % SBX, {}, "127-0-0-3"),
        ("v2_path_names_the_node", "GET", "/v2/sandboxes/%s-127-0-0-2/logs" % SBX, {}, "127-0-0-2"),
        ("host_names_the_node", "GET", "/files?path=/x", {"Host": "49983-%s-127-0-0-3.sandbox.example.com" % SBX}, "127-0-0-3"),
        ("header_wins_over_path", "DELETE", "/sandboxes/%s-127-0-0-2" % SBX, {"E2b-Sandbox-Id": SBX + "-127-0-0-3"}, "127-0-0-3"),
    ]:
        st, _, body = request(port, method, path, headers)
        check(name, st == 200 and json.loads(body) == {"node": node, "path": path}, "%s %s: %s %s" % (method, path, st, body))

    # a snapshot nsboxd named carries its node: a create from it (even on a draining node) and
    # its deletion go there
    snap = "snapshot-0123456789abcdef-127-0-0-3"
    for name, method, path, body in [
        ("create_from_a_snapshot_goes_to_its_node", "POST", "/v2/sandboxes", json.dumps({"templateID": snap, "timeout": 60}).encode()),
        ("snapshot_delete_goes_to_its_node", "DELETE", "/templates/" + snap, None),
    ]:
        st, _, got = request(port, method, path, {"Content-Type": "application/json"}, body=body)
        check(name, st == 200 and json.loads(got) == {"node": "127-0-0-3", "path": path}, "%s %s: %s %s" % (method, path, st, got))

    for name, headers, path, why in [
        ("unknown_node_is_a_json_404", {"E2b-Sandbox-Id": SBX + "-10-9-9-9"}, "/health", "not in the cluster"),
        ("malformed_id_is_a_json_404", {}, "/sandboxes/%s-example.com/pause" % SBX, "malformed"),
        ("host_outside_the_service_is_a_json_404", {"Host": "49983-%s-8-8-8-8.sandbox.example.com" % SBX}, "/files", "not in the cluster"),
    ]:
        st, ctype, body = request(port, "GET", path, headers)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = {}
        check(name, st == 404 and ctype == "application/json" and doc.get("code") == 404 and why in doc.get("message", ""),
              "%s: %s %s %s" % (path, st, ctype, body))

    # a stream is not buffered: its first chunk arrives while the node still writes
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    t0 = time.monotonic()
    c.request("GET", "/sandboxes/%s-127-0-0-2/stream" % SBX)
    r = c.getresponse()
    first = r.readline()
    dt = time.monotonic() - t0
    rest = r.read()
    check("streams_pass_unbuffered", first == b"first\n" and dt < 1.2 and rest == b"second\n",
          "first chunk %r after %.2f s, then %r" % (first, dt, rest))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
