"""An OTLP/HTTP trace receiver built on OpenTelemetry's own `opentelemetry-proto`.

Usage: otlp_receiver.py OUT   listens on 127.0.0.1 (a free port, printed alone on
the first line of stdout), decodes each `POST /v1/traces` body as an
`ExportTraceServiceRequest` and appends every span to OUT as one JSON line:
trace_id, span_id, parent_span_id (hex; "" for a root), name, kind,
start_time_unix_nano, end_time_unix_nano, attributes ({key: value}), events
([{name, time_unix_nano, attributes}]), links, status and the resource's
service_name. It answers 200 with an empty `ExportTraceServiceResponse`; a body that
does not decode gets 400, and its error is written to stderr. It runs until killed
or its stdin closes. otlp_receiver.py --version prints the packages' versions.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value_of(v):
    """An `AnyValue` as plain JSON."""
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(v.kvlist_value.values)
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def attributes_of(kvs):
    return {kv.key: value_of(kv.value) for kv in kvs}


def spans_of(request):
    for rs in request.resource_spans:
        service = attributes_of(rs.resource.attributes).get("service.name")
        for ss in rs.scope_spans:
            for s in ss.spans:
                yield {
                    "trace_id": s.trace_id.hex(),
                    "span_id": s.span_id.hex(),
                    "parent_span_id": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "start_time_unix_nano": s.start_time_unix_nano,
                    "end_time_unix_nano": s.end_time_unix_nano,
                    "attributes": attributes_of(s.attributes),
                    "events": [
                        {
                            "name": e.name,
                            "time_unix_nano": e.time_unix_nano,
                            "attributes": attributes_of(e.attributes),
                        }
                        for e in s.events
                    ],
                    "links": [
                        {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()}
                        for l in s.links
                    ],
                    "status": {"code": s.status.code, "message": s.status.message},
                    "service_name": service,
                    "scope": ss.scope.name,
                }


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(
            f"otlp receiver (opentelemetry-proto {version('opentelemetry-proto')}, "
            f"protobuf {version('protobuf')})"
        )
        return 0
    if len(sys.argv) != 2:
        print("usage: otlp_receiver.py OUT | --version", file=sys.stderr)
        return 2
    out = open(sys.argv[1], "a", encoding="utf-8")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.path != "/v1/traces":
                self.answer(404, b"")
                return
            try:
                request = ExportTraceServiceRequest.FromString(body)
            except DecodeError as e:
                print(f"otlp_receiver: undecodable body: {e}", file=sys.stderr, flush=True)
                self.answer(400, b"")
                return
            with lock:
                for span in spans_of(request):
                    out.write(json.dumps(span, sort_keys=True) + "\n")
                out.flush()
            self.answer(200, ExportTraceServiceResponse().SerializeToString())

        def answer(self, code, body):
            self.send_response(code)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Ends with its parent: the test closes stdin (or dies) and the receiver goes.
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
