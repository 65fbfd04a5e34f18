"""A local stand-in for the Hugging Face Hub's HTTP API, for huggingface_hub's real client.

It answers what `snapshot_download` and `HfApi.model_info` ask (a repository's info at a revision, its
file tree, each file's HEAD and GET under /resolve/), serving real model folders; point the client at
`url` (`endpoint=` or the HF_ENDPOINT variable)."""

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SHA = "a1b2c3d4" * 5


class FakeHub:
    """Serves `repos[hub_id]` (a folder) at commit SHA, or at the commit `revisions[hub_id][rev]` names (the
    same files: "main" moves by setting it); `gated` ids answer as the Hub does: their info to anyone, their
    files 401 without a token and 403 with a token not in `granted`; a file named in `broken` answers 403
    without the Hub's gated error code (a download that stops half way)."""

    def __init__(self, repos: dict[str, Path], gated=(), broken=(), granted=("hf_token_granted",)):
        self.repos, self.gated, self.broken, self.requests = repos, set(gated), set(broken), []
        self.granted, self.revisions = set(granted), {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.answer(body=False)

            def do_GET(self):
                self.answer(body=True)

            def answer(self, body):
                hub.requests.append((self.command, self.path))
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:2] == ["api", "models"]:
                    repo, rest = "/".join(parts[2:4]), parts[4:]
                    if not self.allowed(repo, files=False):
                        return
                    root = hub.repos[repo]
                    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
                    if rest[:1] == ["tree"]:  # the file listing snapshot_download reads
                        data = [{"type": "file", "path": f, "size": (root / f).stat().st_size,
                                 "oid": hashlib.sha1((root / f).read_bytes()).hexdigest()} for f in files]
                    else:  # the repository's info at a revision (.../revision/<rev>)
                        data = {"id": repo, "sha": hub.commit(repo, rest[1] if rest[:1] == ["revision"] else "main"),
                                "siblings": [{"rfilename": f} for f in files], "private": False,
                                "gated": "manual" if repo in hub.gated else False}
                    return self.send(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, body)
                repo, path = "/".join(parts[:2]), "/".join(parts[4:])  # <org>/<name>/resolve/<rev>/<path>
                if not self.allowed(repo):
                    return
                if path in hub.broken:
                    return self.send(403, b"forbidden", {"X-Error-Message": "broken on purpose"}, body)
                data = (hub.repos[repo] / path).read_bytes()
                commit = hub.commit(repo, parts[3])
                self.send(200, data, {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}, body)

            def allowed(self, repo, files=True):
                if repo not in hub.repos:
                    self.send(404, b"", {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}, True)
                    return False
                if files and repo in hub.gated:
                    token = {k.lower(): v for k, v in self.headers.items()}.get("authorization", "").removeprefix("Bearer ")
                    if token not in hub.granted:  # the Hub's words, 401 without a token, 403 with another account's
                        code, why = (403, "you are not in the authorized list") if token else (401, "please log in")
                        self.send(code, b"", {"X-Error-Code": "GatedRepo", "X-Error-Message":
                                              f"Access to model {repo} is restricted: {why}."}, True)
                        return False
                return True

            def send(self, code, data, headers, body):
                self.send_response(code)
                for k, v in {**headers, "Content-Length": str(len(data))}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def commit(self, repo: str, revision: str) -> str:
        """The commit ``revision`` (a branch, a tag or a commit) names in ``repo``; SHA where it names none
        (this stand-in keeps no history: any other commit asked for is served as it is asked)."""
        names = self.revisions.get(repo, {})
        if revision in names:
            return names[revision]
        return SHA if revision == "main" else revision

    def gets(self):
        return [p.split("/resolve/")[1].split("/", 1)[1] for m, p in self.requests if m == "GET" and "/resolve/" in p]
