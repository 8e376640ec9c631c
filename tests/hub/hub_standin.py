"""A STAND-IN for the Hugging Face Hub (no machine here reaches the real one): the three endpoints
``huggingface_hub`` calls to create a repository and commit files to it, answering every file as a
"regular" (inline) upload, checking a card's YAML as the Hub does, and keeping what was committed in a folder the test reads back.

It checks what the real Hub checks for these calls (a Bearer token, a known repository) and nothing
else; LFS and Xet transfers, which the real Hub asks for large files, are not exercised.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from pathlib import Path

import uvicorn


class HubStandin:
    def __init__(self, root: Path, token: str = "hf_standin_token"):
        self.root = root
        self.token = token
        self.repos: dict[str, dict] = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        if headers.get(b"authorization", b"").decode() != f"Bearer {self.token}":
            return await self._reply(send, 401, {"error": "Invalid credentials in Authorization header"})
        path = scope["path"]
        host, port = scope["server"]
        base = f"http://{host}:{port}"
        if path == "/api/repos/create":
            request = json.loads(body)
            repo_type = request.get("type") or "model"
            repo_id = f"{request['organization']}/{request['name']}" if request.get("organization") else request["name"]
            is_private = request.get("visibility", "private" if request.get("private") else "public") == "private"
            self.repos.setdefault(f"{repo_type}s/{repo_id}", {"private": is_private, "commits": []})
            prefix = "" if repo_type == "model" else f"{repo_type}s/"
            return await self._reply(send, 200, {"url": f"{base}/{prefix}{repo_id}", "name": repo_id})
        if path == "/api/validate-yaml":  # the Hub checks a card's metadata before a README is committed
            import yaml

            content = json.loads(body)["content"]
            try:
                yaml.safe_load(content.split("---")[1]) if content.startswith("---") else None
            except yaml.YAMLError as error:
                return await self._reply(send, 400, {"error": f"invalid YAML metadata: {error}"})
            return await self._reply(send, 200, {"errors": [], "warnings": []})
        parts = path.strip("/").split("/")  # api, {type}s, org, name, preupload|commit, revision
        if len(parts) == 6 and parts[0] == "api" and parts[4] in ("preupload", "commit"):
            key = f"{parts[1]}/{parts[2]}/{parts[3]}"
            if key not in self.repos:
                return await self._reply(send, 404, {"error": f"Repository {key} not found"})
            if parts[4] == "preupload":
                files = json.loads(body)["files"]
                return await self._reply(send, 200, {"files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]})
            return await self._commit(send, key, body, base)
        return await self._reply(send, 404, {"error": f"the stand-in Hub does not serve {path}"})

    async def _commit(self, send, key: str, body: bytes, base: str):
        folder = self.root / key
        header = {}
        for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "header":
                header = item["value"]
            elif item["key"] == "file":
                target = folder / item["value"]["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(base64.b64decode(item["value"]["content"]))
        oid = hashlib.sha1(body).hexdigest()
        self.repos[key]["commits"].append(header.get("summary", ""))
        repo = key.removeprefix("models/")
        return await self._reply(send, 200, {"commitUrl": f"{base}/{repo}/commit/{oid}", "commitOid": oid,
                                             "success": True})

    async def _reply(self, send, status: int, payload: dict):
        body = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class HubStandinThread:
    def __init__(self, root: Path):
        from deploy.services import free_port

        self.app = HubStandin(root)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        import time

        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info):
        self.server.should_exit = True
        self.thread.join(10)
