#!/usr/bin/env python3
"""An example Berth broker: resources of type "folder", a directory per resource under a root.

It speaks version 1 of Berth's broker protocol (docs/brokers/external.openapi.yaml) with
nothing but Python's standard library. Berth starts it with the unix socket to listen on in
BERTH_BROKER_SOCKET; run by hand, it listens on --socket or on --port (loopback).

Args of a folder: size_mb (whole number, 1 to 1024; default 10). Config: its path and size.
Hibernating renames the directory aside; waking (a reconcile) puts it back.

Everything the broker knows is on disk under the root, so a broker killed at any moment
picks up where it was when it is started again: every call is idempotent.
"""

import argparse
import datetime
import http.server
import json
import os
import shutil
import socketserver
import sys
import threading
import time

PROTOCOL_VERSION = 1
TYPE = "folder"
MAX_FOLDERS = 1000


class Refused(Exception):
    """A call the broker refuses, with the protocol's error class."""

    STATUS = {"permanent": 422, "retryable": 500, "unavailable": 503, "no_capacity": 409,
              "stale_lease": 409, "not_supported": 501}

    def __init__(self, cls, message, field=None):
        super().__init__(message)
        self.cls, self.message, self.field = cls, message, field

    def body(self):
        error = {"class": self.cls, "message": self.message}
        if self.field:
            error["field"] = self.field
        return {"error": error}


class Folders:
    """The folders under root, and the largest lease token seen per resource."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        os.makedirs(os.path.join(self.root, ".leases"), exist_ok=True)
        self.guard = threading.Lock()
        self.locks = {}

    def lock(self, rid):
        with self.guard:
            return self.locks.setdefault(rid, threading.Lock())

    def path(self, rid, hibernated=False):
        if not rid or "/" in rid or rid.startswith("."):
            raise Refused("permanent", "resource id %r cannot name a folder" % rid, "resource.id")
        return os.path.join(self.root, rid + (".hibernated" if hibernated else ""))

    def fence(self, rid, lease):
        """Refuses a lease older than one seen for rid; remembers the newest, on disk."""
        if lease is None:
            return
        record = os.path.join(self.root, ".leases", rid)
        seen = 0
        try:
            with open(record) as f:
                seen = int(f.read().strip() or 0)
        except FileNotFoundError:
            pass
        if lease["token"] < seen:
            raise Refused("stale_lease", "lease token %d is older than token %d seen for %s" % (lease["token"], seen, rid))
        if lease["token"] > seen:
            write_atomically(record, str(lease["token"]))

    def reconcile(self, resource, options, lease):
        rid = resource["id"]
        size = size_mb(options.get("args") or {})
        self.fence(rid, lease)
        if os.path.exists(self.tombstone(rid)):
            # Ids are never reused: a reconcile after the deprovision is an old attempt.
            raise Refused("stale_lease", "resource %s was deprovisioned" % rid)
        path, aside = self.path(rid), self.path(rid, hibernated=True)
        notice = ""
        if os.path.isdir(aside):
            os.replace(aside, path)  # waking
            notice = "woken"
        if not os.path.isdir(path):
            if self.count() >= MAX_FOLDERS:
                raise Refused("no_capacity", "the root holds %d folders already" % MAX_FOLDERS)
            os.makedirs(path, exist_ok=True)
        write_atomically(os.path.join(path, ".size_mb"), str(size))
        answer = {"resource": self.answer(rid, resource["type"], path, size), "lease": lease}
        if notice:
            answer["notice"] = notice
        return answer

    def await_ready(self, resource, lease):
        return {"ready": os.path.isdir(self.path(resource["id"])), "retry_after_seconds": 0.2, "lease": lease}

    def deprovision(self, resource, lease):
        rid = resource["id"]
        self.fence(rid, lease)
        # The tombstone first: a health check racing the delete must not re-create it.
        write_atomically(self.tombstone(rid), "deprovisioned")
        for path in (self.path(rid), self.path(rid, hibernated=True)):
            shutil.rmtree(path, ignore_errors=True)
        return {"lease": lease}

    def tombstone(self, rid):
        return os.path.join(self.root, ".leases", rid + ".deprovisioned")

    def hibernate(self, resource, options, lease):
        rid = resource["id"]
        self.fence(rid, lease)
        path, aside = self.path(rid), self.path(rid, hibernated=True)
        if os.path.isdir(path):
            os.replace(path, aside)
        state = dict(resource.get("state") or {})
        state["hibernated"] = True
        return {"resource": {"id": rid, "type": resource["type"], "state": state,
                             "config": resource.get("config") or {}}, "lease": lease}

    def check_resource(self, resource, options, lease):
        rid = resource["id"]
        path = self.path(rid)
        if os.path.isdir(self.path(rid, hibernated=True)) or os.path.exists(self.tombstone(rid)):
            return {"resource": resource, "lease": lease}  # nothing to repair
        repairs = []
        size = size_mb(options.get("args") or {})
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)
            repairs.append("folder re-created: it was removed out of band")
        write_atomically(os.path.join(path, ".size_mb"), str(size))
        answer = {"resource": self.answer(rid, resource["type"], path, size), "lease": lease}
        if repairs:
            answer["repairs"] = repairs
        return answer

    def check(self):
        probe = os.path.join(self.root, ".check")
        write_atomically(probe, "ok")
        return {"lease": None, "message": "root %s is writable" % self.root}

    def capacity(self):
        return {"unit": "folders", "total": MAX_FOLDERS, "used": self.count()}

    def count(self):
        return sum(1 for name in os.listdir(self.root) if not name.startswith("."))

    @staticmethod
    def answer(rid, rtype, path, size):
        return {"id": rid, "type": rtype, "state": {"size_mb": size}, "config": {"path": path, "size_mb": size}}


def size_mb(args):
    """Reads the args strictly: an unknown key or a bad value is a permanent refusal."""
    for key in args:
        if key != "size_mb":
            raise Refused("permanent", "unknown arg %r: a folder takes size_mb" % key, "args." + key)
    size = args.get("size_mb", 10)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1024:
        raise Refused("permanent", "must be a whole number from 1 to 1024, got %r" % (size,), "args.size_mb")
    return size


def write_atomically(path, text):
    tmp = path + ".tmp%d" % threading.get_ident()
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def parse_deadline(text):
    """Reads Berth-Deadline (RFC 3339, up to nanoseconds) as seconds since the epoch."""
    text = text.strip().replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        digits = "".join(c for c in rest if c.isdigit())
        text = head + "." + (digits[:6].ljust(6, "0")) + rest[len(digits):]
    return datetime.datetime.fromisoformat(text).timestamp()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    folders = None  # set by main
    token = None

    def address_string(self):
        return "unix" if not self.client_address else str(self.client_address[0])

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))

    def log_request(self, code="-", size="-"):
        pass  # every call is logged by the agent; the broker logs its errors only

    def do_GET(self):
        if not self.authorized():
            return
        if self.path == "/v1/info":
            self.send(200, {"protocol_version": PROTOCOL_VERSION, "name": "python folder broker",
                            "types": [TYPE], "capabilities": ["hibernate", "capacity"]})
        elif self.path == "/v1/capacity":
            self.send(200, self.folders.capacity())
        else:
            self.send(404, Refused("not_supported", "GET %s is not a call of the protocol" % self.path).body())

    def do_POST(self):
        if not self.authorized():
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            deadline = self.headers.get("Berth-Deadline")
            if deadline and parse_deadline(deadline) <= time.time():
                raise Refused("retryable", "the call's deadline passed before it started")
            self.send(200, self.dispatch(body))
        except Refused as r:
            self.send(Refused.STATUS[r.cls], r.body())
        except (ValueError, KeyError, TypeError) as e:
            self.send(400, Refused("permanent", "bad request: %s" % e).body())
        except OSError as e:
            self.send(500, Refused("retryable", "%s" % e).body())

    def dispatch(self, body):
        lease, resource, options = body.get("lease"), body.get("resource"), body.get("options") or {}
        if self.path == "/v1/check":
            return self.folders.check()
        if resource is None:
            raise Refused("permanent", 'the request has no "resource"')
        if resource.get("type") != TYPE:
            raise Refused("permanent", "this broker serves %s, not %r" % (TYPE, resource.get("type")), "type")
        self.fault()
        calls = {
            "/v1/reconcile": lambda: self.folders.reconcile(resource, options, lease),
            "/v1/await-ready": lambda: self.folders.await_ready(resource, lease),
            "/v1/deprovision": lambda: self.folders.deprovision(resource, lease),
            "/v1/hibernate": lambda: self.folders.hibernate(resource, options, lease),
            "/v1/check-resource": lambda: self.folders.check_resource(resource, options, lease),
        }
        if self.path not in calls:
            raise Refused("not_supported", "POST %s is not a call of the protocol" % self.path)
        with self.folders.lock(resource["id"]):
            return calls[self.path]()

    def fault(self):
        """Faults for tests: a file named .hang under the root makes every reconcile hang
        (ignoring its deadline); .slow makes it take that many seconds first."""
        if self.path != "/v1/reconcile":
            return
        if os.path.exists(os.path.join(self.folders.root, ".hang")):
            time.sleep(3600)
        slow = os.path.join(self.folders.root, ".slow")
        if os.path.exists(slow):
            with open(slow) as f:
                time.sleep(float(f.read().strip() or 1))

    def authorized(self):
        if self.token is None or self.headers.get("Authorization") == "Bearer " + self.token:
            return True
        self.send(401, Refused("unavailable", "missing or wrong bearer token").body())
        return False

    def send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class TCPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.environ.get("FOLDER_BROKER_ROOT", "folders"),
                        help="directory holding the folders (env FOLDER_BROKER_ROOT)")
    parser.add_argument("--socket", default=os.environ.get("BERTH_BROKER_SOCKET"),
                        help="unix socket to listen on (env BERTH_BROKER_SOCKET, set by Berth)")
    parser.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT instead of a socket")
    parser.add_argument("--token-file", help="require the bearer token this file holds")
    args = parser.parse_args()

    Handler.folders = Folders(args.root)
    if args.token_file:
        with open(args.token_file) as f:
            Handler.token = f.read().strip()
    with open(os.path.join(Handler.folders.root, ".pid"), "w") as f:
        f.write(str(os.getpid()))
    if args.port is not None:
        server = TCPServer(("127.0.0.1", args.port), Handler)
        where = "127.0.0.1:%d" % server.server_address[1]
    elif args.socket:
        if os.path.exists(args.socket):
            os.remove(args.socket)
        server = UnixServer(args.socket, Handler)
        where = args.socket
    else:
        parser.error("give --socket or --port (Berth sets BERTH_BROKER_SOCKET)")
    print("folder broker listening on %s, root %s" % (where, Handler.folders.root), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
