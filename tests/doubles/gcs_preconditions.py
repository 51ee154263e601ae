"""A proxy in front of gcp-storage-emulator, which ignores ifGenerationMatch on uploads: it answers 412 as GCS
does when the object's generation differs (0: it must not exist), atomically, and forwards the rest."""

from __future__ import annotations

import http.client
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME_IN_METADATA = re.compile(rb'"name"\s*:\s*"([^"]+)"')


def start_proxy(emulator: str) -> ThreadingHTTPServer:
    """Serve on a free 127.0.0.1 port in a daemon thread; `server.server_address` tells where."""
    target = urllib.parse.urlsplit(emulator)
    upload_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            connection.request(self.command, self.path, body=body or None, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()

        def _generation(self, bucket: str, name: str) -> int:
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            quoted = urllib.parse.quote(name, safe="")
            connection.request("GET", f"/storage/v1/b/{bucket}/o/{quoted}")
            response = connection.getresponse()
            data = response.read()
            return int(json.loads(data)["generation"]) if response.status == 200 else 0

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query)
            upload = re.fullmatch(r"/upload/storage/v1/b/([^/]+)/o", url.path)
            if not (upload and "ifGenerationMatch" in query):
                self._reply(*self._forward(body))
                return
            name = query.get("name", [None])[0]
            if name is None:
                found = NAME_IN_METADATA.search(body)
                name = found.group(1).decode() if found else ""
            with upload_lock:
                if self._generation(upload.group(1), name) != int(query["ifGenerationMatch"][0]):
                    error = {"error": {"code": 412, "message": "conditionNotMet"}}
                    self._reply(
                        412, [("Content-Type", "application/json")], json.dumps(error).encode()
                    )
                    return
                self._reply(*self._forward(body))

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
