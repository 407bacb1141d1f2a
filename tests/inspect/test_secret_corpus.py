"""The secrets this audience holds, in the files they sit in (docs/inspect.md, "Kinds found in
text", "Keys that name a secret"): every secret of realistic env files, YAML, JSON, TOML, shell
exports, docker-compose, .npmrc, .pypirc and connection strings is found and masked, nothing
else in them is; and realistic prose, code, docs, lockfiles, hashes and UUIDs give no finding.

The secrets are made at test time from random pieces (no test file holds one): ``{name}`` in a
document is replaced by a fresh value of the shape its name says."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid

import pytest

from assay.inspect.secrets import find_secrets, redact_text, redact_value
from assay.session.records.arguments import logged_arguments

_RNG = random.Random(20260728)
ALNUM = string.ascii_letters + string.digits


def _random(n: int, alphabet: str = ALNUM) -> str:
    body = "".join(_RNG.choice(alphabet) for _ in range(n - 3))
    return "aZ7" + body  # both cases and a digit, wherever it is cut


# name -> (kind, a fresh value)
SHAPES = {
    "openai": ("openai_api_key", lambda: "sk-proj-" + _random(120, ALNUM + "-_")),
    "openai_legacy": ("openai_api_key", lambda: "sk-" + _random(20) + "T3BlbkFJ" + _random(20)),
    "anthropic": ("anthropic_api_key", lambda: "sk-ant-api03-" + _random(93, ALNUM + "-_") + "AA"),
    "hf": ("huggingface_token", lambda: "hf_" + "QwErTy" + _random(28, string.ascii_letters)[3:] + "abc"),
    "google": ("gcp_api_key", lambda: "AIza" + _random(35, ALNUM + "-_")),
    "google_secret": ("google_client_secret", lambda: "GOCSPX-" + _random(28, ALNUM + "-_")),
    "github": ("github_token", lambda: "ghp_" + _random(36)),
    "npm": ("npm_token", lambda: "npm_" + _random(36)),
    "password": ("password", lambda: "Pw" + _random(14, ALNUM + "!#%^*+=~")),
    "db_password": ("url_password", lambda: "Db" + _random(12, ALNUM + "!$%*-_~")),
    "secret": ("secret", lambda: _random(32, ALNUM + "-_")),
    "token": ("token", lambda: _random(40, ALNUM)),
    "api_key": ("api_key", lambda: _random(32, ALNUM)),
    "jwt": (
        "jwt",
        lambda: (
            ".".join(
                base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
                for part in ({"alg": "RS256", "typ": "JWT"}, {"sub": "svc"})
            )
            + "."
            + _random(43, ALNUM + "-_")
        ),
    ),
}

POSITIVES = {
    ".env": """\
# app settings
NODE_ENV=production
PORT=8080
DATABASE_URL=postgres://app:{db_password}@db.internal:5432/app
OPENAI_API_KEY={openai}
ANTHROPIC_API_KEY="{anthropic}"
HF_TOKEN={hf}
SESSION_SECRET='{secret}'
STRIPE_WEBHOOK_TOLERANCE=300
""",
    "config.yaml": """\
server:
  host: 0.0.0.0
  port: 8443
database:
  host: db.internal
  user: app
  password: "{password}"
  pool_size: 10
providers:
  openai:
    api_key: {openai_legacy}
    model: gpt-4o
  google:
    api_key: {google}
    client_secret: {google_secret}
""",
    "settings.json": """\
{{
  "name": "my-service",
  "version": "1.4.2",
  "auth": {{"client_id": "svc-1234", "client_secret": "{secret}", "token_url": "https://auth.example.com/token"}},
  "upstream": {{"access_token": "{jwt}", "timeout_ms": 2500}},
  "x-api-key": "{api_key}"
}}
""",
    "pyproject.toml": """\
[tool.myapp]
name = "worker"
retries = 3
api_key = "{api_key}"

[tool.myapp.db]
url = "mysql://root:{db_password}@127.0.0.1:3306/app"
""",
    "deploy.sh": """\
#!/usr/bin/env bash
set -euo pipefail
export GITHUB_TOKEN={github}
export HUGGING_FACE_HUB_TOKEN="{hf}"
export PGPASSWORD='{password}'
psql -h db.internal -U app -c 'select 1'
""",
    "docker-compose.yml": """\
services:
  db:
    image: postgres:16
    environment:
      - POSTGRES_USER=app
      - POSTGRES_PASSWORD={password}
  api:
    image: ghcr.io/acme/api:1.2
    environment:
      OPENAI_API_KEY: {openai}
      REDIS_URL: redis://:{db_password}@cache:6379/0
""",
    ".npmrc": """\
registry=https://registry.npmjs.org/
//registry.npmjs.org/:_authToken={npm}
always-auth=true
""",
    ".pypirc": """\
[distutils]
index-servers = private
[private]
repository = https://pypi.internal/simple
username = deploy
password = {password}
""",
    "connection strings": """\
Server=tcp:sql.internal,1433;Database=app;User Id=svc;Password={password};Encrypt=true;
jdbc:postgresql://db.internal:5432/app?user=svc&password={password}&ssl=true
mongodb+srv://svc:{db_password}@cluster0.mongodb.net/app?retryWrites=true
host=db.internal port=5432 dbname=app user=svc password={password} sslmode=require
""",
}


def _fill(template: str) -> tuple[str, list[tuple[str, str]]]:
    values: dict[str, str] = {}
    expected = []
    for name, (kind, make) in SHAPES.items():
        if "{" + name + "}" in template:
            values[name] = make()
            expected.append((kind, values[name]))
    return template.format(**values), expected


@pytest.mark.parametrize("name", sorted(POSITIVES))
def test_every_secret_of_a_real_file_is_found_and_nothing_else(name: str) -> None:
    for _ in range(5):  # fresh values each time
        text, expected = _fill(POSITIVES[name])
        found = find_secrets(text)
        got = sorted((s.kind, text[s.start : s.end]) for s in found)
        want = sorted({(kind, value) for kind, value in expected for _ in range(text.count(value))})
        assert sorted(set(got)) == want, (name, got)
        out, _kinds = redact_text(text)
        for _kind, value in expected:
            assert value not in out
        assert out.count("[REDACTED:") == len(found)


def test_the_log_arguments_redaction_uses_the_same_rules() -> None:
    """``--log-arguments`` (docs/wrap-records.md, "Logged arguments") masks what inspection
    finds: one rule set."""
    text, expected = _fill(POSITIVES[".env"])
    logged = logged_arguments({"path": "/srv/app/.env", "content": text}, 1 << 20)
    shown = json.dumps(logged)
    for _kind, value in expected:
        assert value not in shown
    assert logged["content"] == redact_text(text)[0]
    # a JSON member under a key that names a secret: replaced whole, whatever it holds
    assert redact_value({"password": "example"})[0] == {"password": "[REDACTED:password]"}


NEGATIVES = {
    "prose": """\
To call the API you need an API key. Keep the key and your password in a vault, never in the
repository; rotate a token when someone leaves. The client sends the token in the Authorization
header, and the server checks its secret before it answers. If the password is wrong three times,
the account is locked for ten minutes. A token expires after an hour; ask for a new one with the
refresh token. The secret key of the app signs the session cookie.
""",
    "python": """\
import os
from getpass import getpass

API_KEY = os.environ["API_KEY"]
password = getpass("Password: ")
token = request.headers.get("Authorization", "").removeprefix("Bearer ")
secret = settings.SECRET_KEY
api_key: str | None = None
DB_PASSWORD: str = Field(default=..., env="DB_PASSWORD")


def login(user: str, password: str, token: str | None = None) -> Session:
    if not check_password(user, password):
        raise AuthError("bad password")
    session = Session(user=user, token=token or new_token())
    session.secret = hashlib.sha256(password.encode()).hexdigest()
    return session


tokens = tokenize(source)
for token in tokens:
    if token.type == "NAME":
        yield token
max_tokens = 4096
next_page_token = response["nextPageToken"]
""",
    "javascript": """\
const apiKey = process.env.OPENAI_API_KEY;
const password = req.body.password;
const token = jwt.sign({ sub: user.id }, secret, { expiresIn: "1h" });
export const config = { apiKey, password: process.env.DB_PASSWORD || "", token: undefined };
if (password === confirmPassword) { setSecret(generateSecret(32)); }
fetch(url, { headers: { Authorization: `Bearer ${token}` } });
""",
    "go and rust": """\
token := os.Getenv("GITHUB_TOKEN")
password, err := readPassword(os.Stdin)
cfg := Config{APIKey: viper.GetString("api_key"), Secret: []byte(secret)}
let api_key = std::env::var("API_KEY")?;
let password: String = rpassword::prompt_password("Password: ")?;
""",
    "docs": """\
## Configuration

Set these variables before you start the server:

| variable | what |
|---|---|
| `OPENAI_API_KEY` | your OpenAI key (`sk-...`) |
| `HF_TOKEN` | a Hugging Face token with read access |
| `DB_PASSWORD` | the database password |

```bash
export OPENAI_API_KEY=sk-...
export HF_TOKEN=hf_xxxxxxxxxxxxxxxx
export DB_PASSWORD=<your password>
docker run -e POSTGRES_PASSWORD=example -e POSTGRES_USER=postgres postgres:16
DATABASE_URL=postgres://user:password@localhost:5432/app
```

In `config.yaml`, `api_key: ${OPENAI_API_KEY}` reads the key from the environment, and
`password: !env DB_PASSWORD` does the same for the password. See the `token` option below.
""",
    ".env.example": """\
OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxx
ANTHROPIC_API_KEY=your-anthropic-key-here
DB_PASSWORD=changeme
SESSION_SECRET=replace_me_with_a_long_random_string
GITHUB_TOKEN=
API_KEY=${API_KEY}
""",
    "ci workflow": """\
jobs:
  test:
    runs-on: ubuntu-latest
    env:
      NPM_TOKEN: ${{ secrets.NPM_TOKEN }}
      PASSWORD: ${{ secrets.DB_PASSWORD }}
    steps:
      - uses: actions/checkout@v4
      - run: npm ci
        env:
          NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}
""",
    "kubernetes": """\
env:
  - name: DB_PASSWORD
    valueFrom:
      secretKeyRef:
        name: db-credentials
        key: password
  - name: API_TOKEN
    valueFrom: {secretKeyRef: {name: api-token, key: token}}
secret: db-credentials
token: api-token
""",
    "openapi": """\
components:
  schemas:
    Login:
      type: object
      properties:
        username: {type: string, example: alice}
        password: {type: string, format: password, minLength: 12, example: string}
        token: {type: string, description: The access token to use}
      required: [username, password]
""",
    "lockfiles": """\
"node_modules/lodash": {
  "version": "4.17.21",
  "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",
  "integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXPs17LhbZVGedAJv8XZ1tvj5FvSg=="
},
[[package]]
name = "requests"
version = "2.32.3"
files = [{file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:70761cfe03c773ceb22aa2f671b4757976145175cdfca038c02654d061d6dcc6"}]
github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr3hNDXQHxI4Du0=
checksum = "5f0c6b5d2e1b7d34f41c7b16a5fb1e0da2e4c4e2d8c7f2b6f0a1e2d3c4b5a697"
""",
}


def _hashes_and_uuids() -> str:
    rng = random.Random(7)
    lines = []
    for i in range(200):
        data = rng.randbytes(32)
        lines += [
            hashlib.sha1(data).hexdigest(),
            hashlib.sha256(data).hexdigest(),
            str(uuid.UUID(bytes=data[:16])),
            base64.b64encode(data).decode(),
            f"commit {hashlib.sha1(data).hexdigest()} token #{i}",
        ]
    return "\n".join(lines)


NEGATIVES["hashes and uuids"] = _hashes_and_uuids()


@pytest.mark.parametrize("name", sorted(NEGATIVES))
def test_ordinary_text_about_secrets_gives_no_finding(name: str) -> None:
    text = NEGATIVES[name]
    assert [(s.kind, text[s.start : s.end]) for s in find_secrets(text)] == []


def test_a_json_member_under_a_key_that_names_a_secret_is_judged_as_its_text_would_be() -> None:
    """The helper a walk over a parsed value uses (docs/inspect.md, "Keys that name a secret")."""
    from assay.inspect.secret_keys import member_secret

    assert member_secret("password", "hunter") == "password"
    assert member_secret("GITHUB_TOKEN", _random(40)) == "token"
    assert member_secret("x-api-key", _random(32)) == "api_key"
    for key, value in [
        ("password", "changeme"),
        ("password", "<your password>"),
        ("token", "${TOKEN}"),
        ("next_page_token", _random(40)),
        ("max_tokens", "4096"),
        ("password", 12345678),
        ("path", _random(20)),
        ("token", "abc"),
        ("secret", "/run/secrets/db"),
    ]:
        assert member_secret(key, value) is None, (key, value)
