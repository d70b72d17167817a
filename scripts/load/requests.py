"""Pairs each minted JWS with an HS256 bearer token for one of ACCOUNTS accounts: reads JWS lines on stdin, writes
"token<TAB>jws" lines on stdout. Usage: requests.py SECRET ACCOUNTS"""
import base64, hashlib, hmac, json, sys, time

def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

secret, accounts = sys.argv[1].encode(), int(sys.argv[2])
header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
tokens = []
for n in range(accounts):
    claims = b64(json.dumps({"sub": f"load-{n}", "exp": int(time.time()) + 3600}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    tokens.append(f"{header}.{claims}.{b64(hmac.new(secret, signing_input, hashlib.sha256).digest())}")
for n, line in enumerate(sys.stdin):
    jws = line.strip()
    if jws:
        sys.stdout.write(f"{tokens[n % accounts]}\t{jws}\n")
